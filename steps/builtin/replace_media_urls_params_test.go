package builtin_test

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/steps/builtin"
)

func TestReplaceMediaURLsPlugin(t *testing.T) {
	t.Parallel()
	assert.Equal(t, "replace-media-urls", builtin.ReplaceMediaURLsType)
	assert.Equal(t, builtin.ReplaceMediaURLsType, builtin.NewReplaceMediaURLsPlugin().Type)
	step, err := builtin.NewReplaceMediaURLsPlugin().New(nil)
	require.NoError(t, err, "every param has a default")
	assert.IsType(t, &builtin.ReplaceMediaURLs{}, step)
}

func TestReplaceMediaURLsParams(t *testing.T) {
	t.Parallel()
	const maxMB = (math.MaxInt64 - 1) / (1 << 20)
	tests := []struct {
		name   string
		params map[string]any
		err    string // "" when valid
	}{
		{name: "all set", params: map[string]any{
			"download_timeout": "30s", "max_concurrent_downloads": 4, "max_multimodal_entries": 8,
			"max_download_size": 20, "max_total_download_size": 200, "allow_private_networks": true, "allowed_domains": []any{"a.test", "B.test"},
		}},
		{name: "injected pipeline keys ignored", params: map[string]any{"kv_connector": "kv-nixl", "ec_connector": "ec-nixl", "use_openai_format": true}},
		{name: "integral float", params: map[string]any{"max_concurrent_downloads": 10.0, "max_download_size": 10.0, "max_multimodal_entries": 0.0}},
		{name: "json number", params: map[string]any{"max_concurrent_downloads": json.Number("3")}},
		{name: "int64", params: map[string]any{"max_download_size": int64(5)}},
		{name: "largest download size", params: map[string]any{"max_download_size": maxMB}},
		{name: "total unlimited", params: map[string]any{"max_total_download_size": 0}},
		{name: "largest total", params: map[string]any{"max_total_download_size": maxMB}},
		{name: "allowed_domains as []string", params: map[string]any{"allowed_domains": []string{"images.test"}}},
		{name: "allowed_domains empty", params: map[string]any{"allowed_domains": []any{}}},
		{name: "allowed_domains null", params: map[string]any{"allowed_domains": nil}},

		{name: "concurrency zero", params: map[string]any{"max_concurrent_downloads": 0}, err: "max_concurrent_downloads must be positive, got 0"},
		{name: "concurrency negative", params: map[string]any{"max_concurrent_downloads": -1}, err: "max_concurrent_downloads must be positive, got -1"},
		{name: "concurrency string", params: map[string]any{"max_concurrent_downloads": "10"}, err: "max_concurrent_downloads: expected number, got string"},
		{name: "concurrency fraction", params: map[string]any{"max_concurrent_downloads": 10.5}, err: "max_concurrent_downloads: expected integer, got 10.5"},
		{name: "concurrency bool", params: map[string]any{"max_concurrent_downloads": true}, err: "max_concurrent_downloads: expected number, got bool"},
		{name: "entries negative", params: map[string]any{"max_multimodal_entries": -1}, err: "max_multimodal_entries must be non-negative, got -1"},
		{name: "entries string", params: map[string]any{"max_multimodal_entries": "2"}, err: "max_multimodal_entries: expected number, got string"},
		{name: "size zero", params: map[string]any{"max_download_size": 0}, err: "max_download_size must be positive and at most 8796093022207 MB, got 0"},
		{name: "size negative", params: map[string]any{"max_download_size": -1}, err: "max_download_size must be positive and at most 8796093022207 MB, got -1"},
		{name: "size over the limit", params: map[string]any{"max_download_size": maxMB + 1}, err: "max_download_size must be positive and at most 8796093022207 MB, got 8796093022208"},
		{name: "size MaxInt64", params: map[string]any{"max_download_size": int64(math.MaxInt64)}, err: "max_download_size must be positive and at most 8796093022207 MB, got 9223372036854775807"},
		{name: "size string", params: map[string]any{"max_download_size": "10"}, err: "max_download_size: expected number, got string"},
		{name: "size fraction", params: map[string]any{"max_download_size": 10.5}, err: "max_download_size: expected integer, got 10.5"},
		{name: "total negative", params: map[string]any{"max_total_download_size": -1}, err: "max_total_download_size must be non-negative and at most 8796093022207 MB, got -1"},
		{name: "total over the limit", params: map[string]any{"max_total_download_size": maxMB + 1}, err: "max_total_download_size must be non-negative and at most 8796093022207 MB, got 8796093022208"},
		{name: "total fraction", params: map[string]any{"max_total_download_size": 1.5}, err: "max_total_download_size: expected integer, got 1.5"},
		{name: "timeout without unit", params: map[string]any{"download_timeout": "30"}, err: `download_timeout: expected a duration string like "30s", got "30"`},
		{name: "timeout a number", params: map[string]any{"download_timeout": 30}, err: `download_timeout: expected a duration string like "30s", got 30`},
		{name: "timeout zero", params: map[string]any{"download_timeout": "0s"}, err: "download_timeout must be positive, got 0s"},
		{name: "timeout negative", params: map[string]any{"download_timeout": "-1s"}, err: "download_timeout must be positive, got -1s"},
		{name: "allow_private_networks string", params: map[string]any{"allow_private_networks": "true"}, err: "allow_private_networks: expected bool, got string"},
		{name: "allowed_domains not a list", params: map[string]any{"allowed_domains": "images.test"}, err: "allowed_domains: expected a list of strings, got string"},
		{name: "allowed_domains non-string entry", params: map[string]any{"allowed_domains": []any{"a.test", 3}}, err: "allowed_domains[1]: expected string, got int"},
		{name: "allowed_domains empty entry", params: map[string]any{"allowed_domains": []any{"a.test", " "}}, err: "allowed_domains[1]: empty domain"},
		{name: "unknown key", params: map[string]any{"max_downloads": 3}, err: `unknown key "max_downloads"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			step, err := builtin.NewReplaceMediaURLsPlugin().New(tt.params)
			if tt.err == "" {
				require.NoError(t, err)
				assert.NotNil(t, step)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.err)
			assert.Nil(t, step)
		})
	}
}
