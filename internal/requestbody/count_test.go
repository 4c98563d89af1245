package requestbody

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/internal/wire/legs"
)

// A count body is checked as the inference body of its API, but a Messages
// one needs no max_tokens (nor is one read); other formats are refused.
func TestCheckCount(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		format legs.Format
		body   string
		want   string // "" passes
	}{
		{"messages without max_tokens", legs.FormatMessages, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`, ""},
		{"messages max_tokens not read", legs.FormatMessages, `{"max_tokens":0,"messages":[]}`, ""},
		{"messages missing", legs.FormatMessages, `{"model":"m"}`, "messages is required"},
		{"messages bad image", legs.FormatMessages, `{"messages":[{"role":"user","content":[{"type":"image","source":{"type":"file"}}]}]}`, "unknown image source type"},
		{"messages bad system", legs.FormatMessages, `{"system":[{"type":"video"}],"messages":[]}`, "unknown content block type"},
		{"responses", legs.FormatResponses, `{"input":"hi"}`, ""},
		{"responses stateful", legs.FormatResponses, `{"input":"hi","store":true}`, `"store": true`},
		{"responses no input", legs.FormatResponses, `{}`, "input is required"},
		{"chat", legs.FormatChat, `{"messages":[]}`, "Messages or Responses"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			doc, err := Parse([]byte(tc.body), tc.format)
			require.NoError(t, err)
			err = doc.CheckCount()
			if tc.want == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.True(t, errors.Is(err, legs.ErrInvalidRequest), "%v", err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}
