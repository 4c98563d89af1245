package tochat

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/coordinator-project/coordinator/internal/wire/legs"
)

// fuzzConvert holds a conversion to "no panic; every refusal is the
// client's fault; what it writes is a JSON object with messages".
func fuzzConvert(f *testing.F, convert func([]byte) ([]byte, error), seeds []string) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		out, err := convert(body)
		if err != nil {
			if !errors.Is(err, legs.ErrInvalidRequest) {
				t.Fatalf("not the client's fault: %v", err)
			}
			return
		}
		var chat struct {
			Messages []json.RawMessage `json:"messages"`
		}
		if err := json.Unmarshal(out, &chat); err != nil || chat.Messages == nil {
			t.Fatalf("not a chat body: %s (%v)", out, err)
		}
	})
}

func FuzzMessages(f *testing.F) {
	fuzzConvert(f, Messages, []string{
		`{"system":"s","messages":[{"role":"user","content":"hi"}]}`,
		`{"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":{"a":[1,"é"]}},{"type":"thinking","thinking":"x"}]},` +
			`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"r"},{"type":"image","source":{"type":"url","url":"u"}}]}]}],` +
			`"tools":[{"name":"f","input_schema":{}}],"tool_choice":{"type":"tool","name":"f"}}`,
		`{"messages":[{"role":"user","content":[{"type":"tool_use","input":"x"}]}]}`,
	})
}

func FuzzResponses(f *testing.F) {
	fuzzConvert(f, Responses, []string{
		`{"instructions":"s","input":"hi"}`,
		`{"input":[{"role":"user","content":[{"type":"input_text","text":"a"},{"type":"input_image","image_url":"u"}]},` +
			`{"type":"reasoning","summary":[{"text":"r"}]},{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},` +
			`{"type":"function_call_output","call_id":"c","output":"o"}],"tools":[{"type":"function","name":"f"}]}`,
	})
}
