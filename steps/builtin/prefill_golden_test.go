package builtin_test

import (
	"strings"
	"testing"

	"github.com/coordinator-project/coordinator/internal/headers"
	"github.com/coordinator-project/coordinator/internal/wire/legs"
	"github.com/coordinator-project/coordinator/steps"
	"github.com/coordinator-project/coordinator/steps/steptest"
)

// Golden files of every prefill leg body, under testdata/prefill/.
// Regenerate with go test ./steps -run PrefillGolden -update, then review
// the diff.

// TestPrefillGolden: the prefill leg of each request shape, for every KV
// connector (kv-sglang's random bootstrap_room removed) and, where the
// request has images, every EC connector.
func TestPrefillGolden(t *testing.T) {
	t.Parallel()
	withDescriptors := func(rc *steps.RequestContext) *steps.RequestContext {
		rc.ECDescriptors = ecDescriptors()
		return rc
	}
	tests := []struct {
		name      string
		rc        func() *steps.RequestContext
		useOpenAI bool
		ec        []string
	}{
		{name: "chat", rc: func() *steps.RequestContext { return withDescriptors(mmChatContext()) }, useOpenAI: true,
			ec: []string{"ec-nixl", "ec-shared-storage"}},
		{name: "chat-tokens-in", rc: func() *steps.RequestContext { return withDescriptors(mmChatContext()) }, useOpenAI: false,
			ec: []string{"ec-nixl", "ec-shared-storage"}},
		{name: "generate", rc: func() *steps.RequestContext { return withDescriptors(mmGenerateContext()) }, useOpenAI: true,
			ec: []string{"ec-nixl", "ec-shared-storage"}},
		{name: "generate-no-render", rc: generateNoRenderContext(generateNoRenderBody), useOpenAI: true,
			ec: []string{"ec-shared-storage"}},
		{name: "generate-no-render-spaced", rc: generateNoRenderContext(generateNoRenderSpaced), useOpenAI: true,
			ec: []string{"ec-shared-storage"}},
		{name: "completions-string-prompt", rc: func() *steps.RequestContext { return completionsContext(`"Hello, world"`, nil) }, useOpenAI: true,
			ec: []string{"ec-shared-storage"}},
		{name: "completions-token-prompt", rc: func() *steps.RequestContext {
			return completionsContext(`"Hello, world"`, []uint32{1, 15043, 29892, 3186})
		}, useOpenAI: true,
			ec: []string{"ec-shared-storage"}},
	}
	for _, tt := range tests {
		for _, kvName := range []string{"kv-nixl", "kv-sglang", "kv-shared-storage"} {
			for _, ecName := range tt.ec {
				name := "prefill/" + tt.name + "/" + kvName + "_" + ecName
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					leg := runPrefill(t, map[string]any{"use_openai_format": tt.useOpenAI, "kv_connector": kvName, "ec_connector": ecName}, tt.rc())
					body, wire := leg.Body, leg.Body
					if kvName == "kv-sglang" {
						body, wire = withoutSGLangRoom(t, body), pinnedSGLangRoom(t, wire)
					}
					goldenJSON(t, name, body)
					goldenWire(t, name, wire)
				})
			}
		}
	}
}

// Tokens-in bodies that no render step read: the prefill leg takes the
// prompt from the body (its token_ids bytes as sent when written as legs
// write them, else re-encoded, and its images with their tensors).
const (
	generateNoRenderBody = `{"model":"llava","token_ids":[1,32000,32000,32000,2345,6789],` +
		`"features":{"mm_hashes":{"image":["abc123hash"]},"mm_placeholders":{"image":[{"offset":1,"length":3}]},` +
		`"kwargs_data":{"image":["dGVuc29yLTE="]}},"sampling_params":{"max_tokens":50,"temperature":0.7},"stream":true}`
	generateNoRenderSpaced = `{ "model": "llava", "token_ids": [ 1, 15043, 29892 ], ` +
		`"sampling_params": { "max_tokens": 50 }, "cache_salt": "tenant-a" }`
)

// generateNoRenderContext is a tokens-in request as the service builds it
// from a REST or gRPC JSON body, before any step: no token IDs or images
// typed yet.
func generateNoRenderContext(body string) func() *steps.RequestContext {
	return func() *steps.RequestContext {
		return &steps.RequestContext{
			RequestID: "req-abc-123",
			Format:    legs.FormatGenerate,
			Header:    headers.NewForwarded("authorization", "Bearer t", "traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"),
			Body:      []byte(body),
			Model:     "llava",
			Stream:    strings.Contains(body, `"stream":true`),
			Sink:      &steptest.Sink{},
		}
	}
}
