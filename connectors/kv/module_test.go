package kv_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"

	"github.com/coordinator-project/coordinator/connectors/kv"
)

// The module tests set the environment, so they do not run in parallel.

func TestModule(t *testing.T) {
	t.Setenv(kv.SGLangPortEnv, "")
	var set *kv.Set
	app := fx.New(kv.Module, fx.Populate(&set), fx.NopLogger)
	require.NoError(t, app.Err())
	assert.Equal(t, []string{kv.NIXLName, kv.SGLangName, kv.SharedStorageName}, set.Names())

	def, err := set.Get("")
	require.NoError(t, err)
	assert.Equal(t, kv.SharedStorageName, def.Name())

	_, err = set.Get("kv-mooncake")
	assert.EqualError(t, err, `unknown kv_connector: "kv-mooncake" (known: kv-nixl, kv-sglang, kv-shared-storage)`)
}

func TestModuleSGLangPortFromEnv(t *testing.T) {
	t.Setenv(kv.SGLangPortEnv, "9100")
	var set *kv.Set
	app := fx.New(kv.Module, fx.Populate(&set), fx.NopLogger)
	require.NoError(t, app.Err())

	c, err := set.Get(kv.SGLangName)
	require.NoError(t, err)
	got, err := c.PrefillParams()
	require.NoError(t, err)
	var p struct {
		BootstrapPort json.RawMessage `json:"bootstrap_port"`
	}
	require.NoError(t, json.Unmarshal(got, &p))
	assert.Equal(t, "9100", string(p.BootstrapPort))
}

func TestModuleBadSGLangPort(t *testing.T) {
	t.Setenv(kv.SGLangPortEnv, "65536")
	var set *kv.Set
	app := fx.New(kv.Module, fx.Populate(&set), fx.NopLogger)
	assert.ErrorContains(t, app.Err(), `SGLANG_BOOTSTRAP_PORT: "65536"`)
}
