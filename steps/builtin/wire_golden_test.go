package builtin_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/internal/gateway"
	"github.com/coordinator-project/coordinator/internal/requestbody"
	"github.com/coordinator-project/coordinator/internal/wire/features"
	"github.com/coordinator-project/coordinator/internal/wire/legs"
	"github.com/coordinator-project/coordinator/steps"
)

// Golden files of legs written from client bodies spaced and escaped as
// Python's json.dumps and hand-written clients write them, under
// testdata/wire/, compared byte for byte: what a leg keeps of the client's
// bytes and what it rewrites is part of the wire contract. Regenerate with
// go test ./steps -run LegWireGolden -update, then review the diff.

// spacedChat is a multimodal chat as json.dumps writes it, with escapes.
const spacedChat = `{"model": "llava", "stream": true, "stream_options": {"include_usage": true}, "max_tokens": 100, ` +
	`"messages": [{"role": "system", "content": "be \"brief\""}, {"role": "user", "content": [{"type": "text", "text": "caf\u00e9"}, ` +
	`{"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,/9j/4AAQ", "detail": "high"}}, ` +
	`{"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0K"}, "uuid": "client"}]}], ` +
	`"temperature": 1.0E0, "cache_salt": "tenant-a" }`

// spacedMessages is an Anthropic Messages request as json.dumps writes it,
// with a downloaded image (base64 source) and escapes.
const spacedMessages = `{"model": "claude-ish", "max_tokens": 64, "stream": true, "system": "be \"brief\"", ` +
	`"messages": [{"role": "user", "content": [{"type": "text", "text": "caf\u00e9"}, ` +
	`{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0K"}}]}], ` +
	`"temperature": 1.0E0, "metadata": {"user_id": "u"} }`

// spacedResponses is an OpenAI Responses request as json.dumps writes it.
const spacedResponses = `{"model": "m", "input": [{"role": "user", "content": [{"type": "input_text", "text": "caf\u00e9"}, ` +
	`{"type": "input_image", "image_url": "data:image/png;base64,iVBORw0K"}]}], "max_output_tokens": 64, "stream": true, ` +
	`"store": false, "temperature": 1.0E0 }`

func TestLegWireGolden(t *testing.T) {
	t.Parallel()
	images := func() []features.MultimodalEntry {
		return []features.MultimodalEntry{
			{Index: 0, Hash: hash0, KwargsData: []byte(`"dGVuc29yLTA="`), Placeholder: features.Placeholder{Offset: 1, Length: 3}},
			{Index: 1, Hash: hash1, KwargsData: []byte("null"), Placeholder: features.Placeholder{Offset: 4, Length: 3}},
		}
	}
	tests := []struct {
		name      string
		format    legs.Format
		body      string
		ids       []uint32
		images    bool
		useOpenAI bool
		steps     []string
	}{
		{name: "chat-openai", format: legs.FormatChat, body: spacedChat, ids: mmTokenIDs, images: true, useOpenAI: true,
			steps: []string{"conditional-decode", "encode", "prefill", "decode"}},
		{name: "chat-tokens-in", format: legs.FormatChat, body: spacedChat, ids: mmTokenIDs, images: true,
			steps: []string{"conditional-decode", "encode", "prefill", "decode"}},
		{name: "completions-spaced-ids", format: legs.FormatCompletions, body: `{"model": "m", "prompt": [1, 2, 3], "max_tokens": 4, "logit_bias": {"1" : 1.50}}`,
			ids: []uint32{1, 2, 3}, useOpenAI: true, steps: []string{"conditional-decode", "prefill", "decode"}},
		{name: "completions-canonical-ids", format: legs.FormatCompletions, body: `{"model":"m","prompt":[1,2,3],"max_tokens":4}`,
			ids: []uint32{1, 2, 3}, useOpenAI: true, steps: []string{"conditional-decode", "prefill", "decode"}},
		{name: "generate-spaced", format: legs.FormatGenerate,
			body: `{"model": "m", "token_ids": [1, 2], "sampling_params": {"max_tokens": 5, "extra_args": {"keep": 1}}, "stream": false}`,
			ids:  []uint32{1, 2}, steps: []string{"conditional-decode", "prefill", "decode"}},
		// Messages: P/D in its own shape; no encode leg (vLLM's /v1/messages
		// takes no ec_transfer_params): the prefill worker encodes the image.
		{name: "messages-decode-only", format: legs.FormatMessages, body: spacedMessages, useOpenAI: true, steps: []string{"decode"}},
		{name: "messages-pd", format: legs.FormatMessages, body: spacedMessages, useOpenAI: true,
			steps: []string{"conditional-decode", "prefill", "decode"}},
		{name: "messages-epd-image", format: legs.FormatMessages, body: spacedMessages, images: true,
			steps: []string{"conditional-decode", "encode", "prefill", "decode"}},
		// Responses: no prefill nor encode leg (vLLM's ResponsesRequest takes
		// no kv_transfer_params): the client's bytes go to decode.
		{name: "responses-decode-only", format: legs.FormatResponses, body: spacedResponses, useOpenAI: true, steps: []string{"decode"}},
		{name: "responses-epd-image", format: legs.FormatResponses, body: spacedResponses, images: true, useOpenAI: true,
			steps: []string{"conditional-decode", "encode", "prefill", "decode"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			gw := workers(t)
			params := map[string]any{"use_openai_format": tt.useOpenAI, "kv_connector": "kv-nixl", "ec_connector": "ec-nixl"}
			rc := mmChatContext()
			rc.Format, rc.Body, rc.Tokens, rc.Multimodal = tt.format, []byte(tt.body), requestbody.NewTokens(append([]uint32(nil), tt.ids...)), nil
			if tt.images {
				rc.Multimodal = images()
			}
			for _, name := range tt.steps {
				var step steps.Step
				switch name {
				case "conditional-decode":
					step = newConditionalDecode(t, gw.URL, params)
				case "encode":
					step = newEncode(t, gw.URL, params)
				case "prefill":
					step = newPrefill(t, gw.URL, params)
				case "decode":
					step = newDecode(t, gw.URL, params)
				}
				if err := step.Execute(context.Background(), rc); err != nil && !errors.Is(err, steps.ErrDone) {
					require.NoError(t, err, name)
				}
				if name == "conditional-decode" {
					rc.Sink = mmChatContext().Sink // the fake answered it: a fresh sink for decode
				}
			}
			sentLegs := gw.Legs()
			require.NotEmpty(t, sentLegs)
			for _, leg := range sentLegs {
				goldenWire(t, "wire/"+tt.name+"/"+legName(leg.Header.Get("EPP-Profile"), leg.Header.Get("Prefer"), leg.Body), leg.Body)
			}
		})
	}
}

// legName names a leg by its profile, conditional-decode apart and encode
// legs (sent concurrently) by their image's hash.
func legName(profile, prefer string, body []byte) string {
	switch {
	case prefer != "":
		return "conditional-" + profile
	case profile == gateway.ProfileEncode:
		return fmt.Sprintf("%s-%s", profile, legHash(body))
	}
	return profile
}
