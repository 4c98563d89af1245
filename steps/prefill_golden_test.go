package steps_test

import (
	"testing"

	"github.com/coordinator-project/coordinator/steps"
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
