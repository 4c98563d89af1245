package main

import (
	"io"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"

	"github.com/coordinator-project/coordinator/service/config"
	"github.com/coordinator-project/coordinator/service/logging"
)

// loopbackEnv binds both listeners to free loopback ports.
func loopbackEnv(key string) (string, bool) {
	switch key {
	case "COORDINATOR_SERVER_LISTEN_ADDR", "COORDINATOR_SERVER_GRPC_LISTEN_ADDR":
		return "127.0.0.1:0", true
	}
	return "", false
}

var configs = []string{
	"../../config/coordinator/coordinator.yaml",
	"../../config/dev.yaml",
	"../../service/config/testdata/reference-coordinator.yaml", // the reference's sample, unchanged
}

func TestAppGraphIsComplete(t *testing.T) {
	t.Parallel()
	for _, path := range configs {
		cfg, err := config.Load(path, loopbackEnv)
		require.NoError(t, err, path)
		require.NoError(t, fx.ValidateApp(App(cfg, logging.NewLogger(io.Discard, 1))), path)
	}
}

func TestAppStartsAndStopsOnEachShippedConfig(t *testing.T) {
	t.Parallel()
	for _, path := range configs {
		cfg, err := config.Load(path, loopbackEnv)
		require.NoError(t, err, path)
		app := fxtest.New(t, App(cfg, logging.NewLogger(io.Discard, 1)))
		app.RequireStart()
		app.RequireStop()
	}
}
