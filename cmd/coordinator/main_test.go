package main

import (
	"io"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/fx"

	"github.com/coordinator-project/coordinator/service"
	"github.com/coordinator-project/coordinator/service/config"
)

func TestAppGraphIsComplete(t *testing.T) {
	t.Parallel()
	for _, path := range []string{"../../config/coordinator/coordinator.yaml", "../../config/dev.yaml"} {
		cfg, err := config.Load(path, func(string) (string, bool) { return "", false })
		require.NoError(t, err, path)
		require.NoError(t, fx.ValidateApp(App(cfg, service.NewLogger(io.Discard, 1))), path)
	}
}
