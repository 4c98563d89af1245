package builtin_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/internal/gateway"
	"github.com/coordinator-project/coordinator/internal/requestbody"
	"github.com/coordinator-project/coordinator/internal/wire/legs"
)

// TestPrefillGenerateWithoutRender: a tokens-in request that no render step
// read is prefilled with its own prompt, as decode gets it, never with
// "token_ids": [].
func TestPrefillGenerateWithoutRender(t *testing.T) {
	t.Parallel()
	gw := workers(t)
	rc := generateNoRenderContext(generateNoRenderBody)()
	require.NoError(t, connectorPipeline(t, gw.URL, "kv-nixl", nil).Run(context.Background(), rc))

	prefill := decoded(t, legsOf(gw, gateway.ProfilePrefill)[0].Body)
	assert.Len(t, prefill["token_ids"], 6)
	assert.Equal(t, []any{hash0}, at(prefill, "features", "mm_hashes", "image"))
	decode := decoded(t, legsOf(gw, gateway.ProfileDecode)[0].Body)
	assert.Equal(t, decode["token_ids"], prefill["token_ids"], "both legs carry the one prompt")
	assert.Equal(t, "e1101616", at(decode, "sampling_params", "extra_args", "kv_transfer_params", "remote_engine_id"))
}

// TestPrefillGenerateWithoutRenderChecksThePrompt: the body's prompt is
// checked as render checks it: a client fault (400) before any leg.
func TestPrefillGenerateWithoutRenderChecksThePrompt(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, body, err string }{
		{"no token_ids", `{"model":"m","sampling_params":{}}`, "token_ids is required"},
		{"empty token_ids", `{"model":"m","token_ids":[]}`, "token_ids must not be empty"},
		{"negative id", `{"model":"m","token_ids":[1,-2]}`, "token_ids: index 1"},
		{"not an array", `{"model":"m","token_ids":"1 2"}`, "token_ids must be an array"},
		{"placeholder past the prompt", `{"model":"m","token_ids":[1,2],"features":{"mm_hashes":{"image":["h"]},` +
			`"mm_placeholders":{"image":[{"offset":1,"length":5}]}}}`, "placeholder"},
		{"sampling_params not an object", `{"model":"m","token_ids":[1],"sampling_params":[1]}`, "sampling_params must be an object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			gw := workers(t)
			rc := generateNoRenderContext(tt.body)()
			err := connectorPipeline(t, gw.URL, "kv-nixl", nil).Run(context.Background(), rc)
			require.ErrorIs(t, err, legs.ErrInvalidRequest)
			assert.ErrorContains(t, err, tt.err)
			assert.Empty(t, gw.Legs(), "no leg sent")
		})
	}
}

// TestPrefillTokensInWithoutTokenIDs: a chat request whose prefill leg is
// shaped for the generate format has its token IDs from render; without a
// render step the leg is not sent at all.
func TestPrefillTokensInWithoutTokenIDs(t *testing.T) {
	t.Parallel()
	gw := workers(t)
	rc := mmChatContext()
	rc.Tokens, rc.Multimodal = requestbody.Tokens{}, nil
	err := newPrefill(t, gw.URL, map[string]any{"use_openai_format": false}).Execute(context.Background(), rc)
	require.ErrorContains(t, err, "prefill: no token ids for a tokens-in prefill leg")
	assert.Empty(t, gw.Legs())
}
