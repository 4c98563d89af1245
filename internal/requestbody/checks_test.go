package requestbody

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/internal/jsonbody"
	"github.com/coordinator-project/coordinator/internal/wire/legs"
)

func check(t *testing.T, f legs.Format, body string) error {
	t.Helper()
	root, err := jsonbody.ParseObject([]byte(body))
	require.NoError(t, err, body)
	return Check(root, f)
}

// manyItems is an array of n copies of item.
func manyItems(n int, item string) string {
	return "[" + strings.TrimSuffix(strings.Repeat(item+",", n), ",") + "]"
}

// checkCase is a body and the error it gets ("" for none).
type checkCase struct{ name, body, err string }

// runCheckCases checks each case's body as format f.
func runCheckCases(t *testing.T, f legs.Format, cases []checkCase) {
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := check(t, f, tc.body)
			if tc.err == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.ErrorIs(t, err, legs.ErrInvalidRequest)
			assert.Contains(t, err.Error(), tc.err)
		})
	}
}

func TestCheckResponses(t *testing.T) {
	t.Parallel()
	runCheckCases(t, legs.FormatResponses, []checkCase{
		{"string input", `{"model":"m","input":"hi"}`, ""},
		{"store false", `{"input":"hi","store":false,"previous_response_id":null}`, ""},
		{"message items", `{"input":[{"role":"user","content":[{"type":"input_text","text":"a"},{"type":"input_image","image_url":"data:image/png;base64,AA=="}]},{"type":"function_call_output","call_id":"c","output":"x"}]}`, ""},
		{"string content", `{"input":[{"role":"user","content":"hi"}]}`, ""},
		{"unknown top-level members go on", `{"input":"hi","vllm_xargs":{"a":1},"top_k":3}`, ""},
		{"store true", `{"input":"hi","store":true}`, `"store": true is not supported`},
		{"previous response", `{"input":"hi","previous_response_id":"resp_1"}`, `"previous_response_id" is not supported`},
		{"conversation", `{"input":"hi","conversation":"conv_1"}`, `"conversation" is not supported`},
		{"conversation object", `{"input":"hi","conversation":{"id":"conv_1"}}`, `"conversation" is not supported`},
		{"background", `{"input":"hi","background":true}`, `"background": true is not supported`},
		// vLLM's pydantic reads these as true: the coordinator must too.
		{"store string true", `{"input":"hi","store":"true"}`, `"store": true is not supported`},
		{"store one", `{"input":"hi","store":1}`, `"store": true is not supported`},
		{"store yes", `{"input":"hi","store":"YES"}`, `"store": true is not supported`},
		{"store on", `{"input":"hi","store":"on"}`, `"store": true is not supported`},
		{"background string true", `{"input":"hi","background":"True"}`, `"background": true is not supported`},
		{"background one", `{"input":"hi","background":1.0}`, `"background": true is not supported`},
		{"background y", `{"input":"hi","background":"y"}`, `"background": true is not supported`},
		// vLLM refuses these: so does the coordinator, naming the field.
		{"store two", `{"input":"hi","store":2}`, `"store" must be a boolean`},
		{"store word", `{"input":"hi","store":"maybe"}`, `"store" must be a boolean`},
		{"background array", `{"input":"hi","background":[]}`, `"background" must be a boolean`},
		// false-like values pass
		{"store string false", `{"input":"hi","store":"false","background":"no"}`, ""},
		{"store zero", `{"input":"hi","store":0,"background":0,"previous_response_id":null}`, ""},
		{"store null", `{"input":"hi","store":null,"background":null}`, ""},
		{"no input", `{"model":"m"}`, "input is required"},
		{"null input", `{"input":null}`, "input is required"},
		{"input number", `{"input":3}`, "input must be an array"},
		{"item not object", `{"input":["hi"]}`, "input[0] must be an object"},
		{"role not string", `{"input":[{"role":1,"content":"x"}]}`, "input[0].role must be a string"},
		{"no content", `{"input":[{"role":"user"}]}`, "input[0].content is required"},
		{"content object", `{"input":[{"role":"user","content":{}}]}`, "input[0].content must be an array"},
		{"unknown part", `{"input":[{"role":"user","content":[{"type":"input_video"}]}]}`, `input[0].content[0].type: unknown content type "input_video"`},
		{"part without type", `{"input":[{"role":"user","content":[{"text":"x"}]}]}`, "input[0].content[0].type is required"},
		{"image_url object", `{"input":[{"role":"user","content":[{"type":"input_image","image_url":{"url":"x"}}]}]}`, "input[0].content[0].image_url must be a string"},
		{"max_output_tokens zero", `{"input":"hi","max_output_tokens":0}`, "max_output_tokens must be an integer of at least 1"},
		{"max_output_tokens string", `{"input":"hi","max_output_tokens":"8"}`, "max_output_tokens must be an integer"},
		{"huge input", `{"input":` + manyItems(MaxItems+1, `{"type":"x"}`) + `}`, fmt.Sprintf("input has more than %d items", MaxItems)},
		{"huge content", `{"input":[{"role":"user","content":` + manyItems(MaxItems+1, `{"type":"input_text"}`) + `}]}`, fmt.Sprintf("input[0].content has more than %d items", MaxItems)},
	})
}

func TestCheckMessages(t *testing.T) {
	t.Parallel()
	const ok = `"model":"m","max_tokens":8`
	runCheckCases(t, legs.FormatMessages, []checkCase{
		{"text", `{` + ok + `,"messages":[{"role":"user","content":"hi"}]}`, ""},
		{"blocks", `{` + ok + `,"system":[{"type":"text","text":"s"}],"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image","source":{"type":"url","url":"https://x/a.png"}},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AA=="}}]},{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":{}}]}]}`, ""},
		{"system string", `{` + ok + `,"system":"s","messages":[]}`, ""},
		{"no max_tokens", `{"messages":[]}`, "max_tokens is required"},
		{"max_tokens zero", `{"max_tokens":0,"messages":[]}`, "max_tokens must be an integer of at least 1"},
		{"max_tokens float", `{"max_tokens":1.5,"messages":[]}`, "max_tokens must be an integer"},
		{"no messages", `{` + ok + `}`, "messages is required"},
		{"messages object", `{` + ok + `,"messages":{}}`, "messages must be an array"},
		{"message not object", `{` + ok + `,"messages":[1]}`, "messages[0] must be an object"},
		{"no role", `{` + ok + `,"messages":[{"content":"x"}]}`, "messages[0].role is required"},
		{"content number", `{` + ok + `,"messages":[{"role":"user","content":1}]}`, "messages[0].content must be an array"},
		{"unknown block", `{` + ok + `,"messages":[{"role":"user","content":[{"type":"video"}]}]}`, `messages[0].content[0].type: unknown content block type "video"`},
		{"block type number", `{` + ok + `,"messages":[{"role":"user","content":[{"type":7}]}]}`, "messages[0].content[0].type must be a string"},
		{"image without source", `{` + ok + `,"messages":[{"role":"user","content":[{"type":"image"}]}]}`, "messages[0].content[0].source must be an object"},
		{"image source kind", `{` + ok + `,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"file","file_id":"f"}}]}]}`, `unknown image source type "file"`},
		{"url source without url", `{` + ok + `,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"url"}}]}]}`, "messages[0].content[0].source.url is required"},
		{"base64 without data", `{` + ok + `,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png"}}]}]}`, "source.data is required"},
		{"system block", `{` + ok + `,"system":[{"type":"nope"}],"messages":[]}`, `system[0].type: unknown content block type "nope"`},
		{"huge messages", `{` + ok + `,"messages":` + manyItems(MaxItems+1, `{"role":"user","content":"x"}`) + `}`, fmt.Sprintf("messages has more than %d items", MaxItems)},
	})
}

func TestCheckLeavesOtherFormats(t *testing.T) {
	t.Parallel()
	for _, f := range []legs.Format{legs.FormatChat, legs.FormatCompletions, legs.FormatGenerate} {
		assert.NoError(t, check(t, f, `{"store":true,"input":3,"messages":1}`), f.String())
	}
}

func TestUnstored(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, body, want string
		f                legs.Format
	}{
		{"missing store", `{"input":"hi"}`, `{"input":"hi","store":false}`, legs.FormatResponses},
		{"null store", `{"store":null,"input":"hi"}`, `{"store":false,"input":"hi"}`, legs.FormatResponses},
		{"false-like store", `{"store":"no","input":"hi"}`, `{"store":false,"input":"hi"}`, legs.FormatResponses},
		{"zero store", `{"store":0, "input":"hi"}`, `{"store":false,"input":"hi"}`, legs.FormatResponses},
		{"false kept as sent", `{ "store" : false , "input":"hi"}`, `{ "store" : false , "input":"hi"}`, legs.FormatResponses},
		{"chat has no store", `{"messages":[]}`, `{"messages":[]}`, legs.FormatChat},
		{"messages has no store", `{"messages":[]}`, `{"messages":[]}`, legs.FormatMessages},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			root, err := jsonbody.ParseObject([]byte(tt.body))
			require.NoError(t, err)
			Unstored(root, tt.f)
			if tt.want == tt.body {
				assert.False(t, root.Edited(), "a body that needs no change goes on as sent")
				return
			}
			assert.Equal(t, tt.want, string(root.AppendTo(nil)))
		})
	}
}

// TestCheckStored: a coordinator that stores responses lets "store" and
// "previous_response_id" through to its response store; the rest is
// checked as ever.
func TestCheckStored(t *testing.T) {
	t.Parallel()
	for _, tc := range []checkCase{
		{"store true", `{"input":"hi","store":true}`, ""},
		{"previous response", `{"input":"hi","previous_response_id":"resp_1"}`, ""},
		{"background still refused", `{"input":"hi","store":true,"background":true}`, `"background": true is not supported`},
		{"input still required", `{"store":true}`, "input is required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			doc, err := Parse([]byte(tc.body), legs.FormatResponses)
			require.NoError(t, err)
			err = doc.CheckStored()
			if tc.err == "" {
				assert.NoError(t, err)
				return
			}
			assert.ErrorContains(t, err, tc.err)
			assert.Error(t, doc.Check(), "the stateless check refuses it too")
		})
	}
}
