package pd

import (
	"bytes"
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/internal/wire/legs"
)

// TestPrefillAnswerWeightVersion: a tokens-in prefill answer names the
// version that sampled its token; an answer without one, or in an OpenAI
// format, names none.
func TestPrefillAnswerWeightVersion(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, body string
		format     legs.Format
		want       string
	}{
		{"tokens answer", `{"choices":[{"index":0,"token_ids":[7],"weight_versions":[{"version":"v1","start":0,"end":1}]}],"kv_transfer_params":{}}`, legs.FormatGenerate, "v1"},
		{"the first span", `{"choices":[{"token_ids":[7,8],"weight_versions":[{"version":"a","start":0,"end":1},{"version":"b","start":1,"end":2}]}]}`, legs.FormatGenerate, "a"},
		{"no spans", `{"choices":[{"token_ids":[7],"weight_versions":[]}]}`, legs.FormatGenerate, ""},
		{"no member", `{"choices":[{"token_ids":[7]}]}`, legs.FormatGenerate, ""},
		{"not a string", `{"choices":[{"token_ids":[7],"weight_versions":[{"version":3}]}]}`, legs.FormatGenerate, ""},
		{"not a list", `{"choices":[{"weight_versions":{"version":"v1"}}]}`, legs.FormatGenerate, ""},
		{"chat answer", `{"choices":[{"index":0,"message":{},"weight_versions":[{"version":"v1","start":0,"end":1}]}]}`, legs.FormatChat, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp := &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(bytes.NewReader([]byte(c.body)))}
			_, answer, err := ReadPrefillAnswer(resp, "prefill", c.format)
			require.NoError(t, err)
			assert.Equal(t, c.want, answer.WeightVersion)
		})
	}
}
