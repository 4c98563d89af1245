package ec_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"

	"github.com/coordinator-project/coordinator/connectors/ec"
)

func TestModule(t *testing.T) {
	t.Parallel()
	var set *ec.Set
	app := fx.New(ec.Module, fx.Populate(&set), fx.NopLogger)
	require.NoError(t, app.Err())
	assert.Equal(t, []string{ec.NIXLName, ec.SharedStorageName}, set.Names())

	def, err := set.Get("")
	require.NoError(t, err)
	assert.Equal(t, ec.SharedStorageName, def.Name())

	_, err = set.Get("ec-example")
	assert.EqualError(t, err, `unknown ec_connector: "ec-example" (known: ec-nixl, ec-shared-storage)`)
}
