package connectors_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/connectors"
)

type fake string

func (f fake) Name() string { return string(f) }

func TestSetGet(t *testing.T) {
	t.Parallel()
	set, err := connectors.NewSet("kv_connector", "kv-b", []fake{"kv-c", "kv-a", "kv-b"})
	require.NoError(t, err)
	for _, tc := range []struct {
		name    string
		get     string
		want    fake
		wantErr string
	}{
		{name: "empty means default", get: "", want: "kv-b"},
		{name: "named", get: "kv-c", want: "kv-c"},
		{name: "default by name", get: "kv-b", want: "kv-b"},
		{name: "unknown lists known names sorted", get: "kv-x", wantErr: `unknown kv_connector: "kv-x" (known: kv-a, kv-b, kv-c)`},
		{name: "case matters", get: "KV-A", wantErr: `unknown kv_connector: "KV-A" (known: kv-a, kv-b, kv-c)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := set.Get(tc.get)
			if tc.wantErr != "" {
				assert.EqualError(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestSetNames(t *testing.T) {
	t.Parallel()
	set, err := connectors.NewSet("ec_connector", "ec-b", []fake{"ec-c", "ec-b", "ec-a"})
	require.NoError(t, err)
	assert.Equal(t, []string{"ec-a", "ec-b", "ec-c"}, set.Names())
}

func TestNewSetErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		def        string
		connectors []fake
		wantErr    string
	}{
		{
			name:       "duplicate registration",
			def:        "kv-a",
			connectors: []fake{"kv-a", "kv-b", "kv-a"},
			wantErr:    `kv_connector "kv-a" registered twice`,
		},
		{
			name:       "default not registered",
			def:        "kv-z",
			connectors: []fake{"kv-a", "kv-b"},
			wantErr:    `kv_connector: default "kv-z" is not registered`,
		},
		{
			name:    "no connectors",
			def:     "kv-a",
			wantErr: `kv_connector: default "kv-a" is not registered`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			set, err := connectors.NewSet("kv_connector", tc.def, tc.connectors)
			assert.Nil(t, set)
			assert.EqualError(t, err, tc.wantErr)
		})
	}
}
