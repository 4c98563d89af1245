package tochat

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/internal/wire/legs"
)

type convCase struct {
	name, body, want string
}

func runConv(t *testing.T, convert func([]byte) ([]byte, error), cases []convCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := convert([]byte(tc.body))
			require.NoError(t, err)
			assert.JSONEq(t, tc.want, string(got))
		})
	}
}

func TestMessages(t *testing.T) {
	t.Parallel()
	runConv(t, Messages, []convCase{
		{"string content, system string", `{"model":"m","max_tokens":5,"temperature":1,"system":"Be brief.","messages":[{"role":"user","content":"Hi"}]}`,
			`{"model":"m","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"}]}`},
		{"system blocks joined, billing header dropped, system messages after",
			`{"system":[{"type":"text","text":"x-anthropic-billing-header: h"},{"type":"text","text":"A"},{"type":"text","text":"B"}],` +
				`"messages":[{"role":"system","content":"C"},{"role":"user","content":[{"type":"text","text":"Hi"}]}]}`,
			`{"messages":[{"role":"system","content":"ABC"},{"role":"user","content":"Hi"}]}`},
		{"text and images as parts",
			`{"messages":[{"role":"user","content":[{"type":"text","text":"Look"},{"type":"image","source":{"type":"url","url":"https://x/a.png"}},` +
				`{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AAA"}}]}]}`,
			`{"messages":[{"role":"user","content":[{"type":"text","text":"Look"},{"type":"image_url","image_url":{"url":"https://x/a.png"}},` +
				`{"type":"image_url","image_url":{"url":"data:image/png;base64,AAA"}}]}]}`},
		{"thinking, tool_use, tool_result",
			`{"messages":[{"role":"assistant","content":[{"type":"thinking","thinking":"hm","signature":"s"},{"type":"redacted_thinking","data":"x"},` +
				`{"type":"text","text":"Calling"},{"type":"tool_use","id":"t1","name":"f","input":{"b":"é","a":[1,2.5]}}]},` +
				`{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"r1"},{"type":"text","text":"r2"},` +
				`{"type":"image","source":{"type":"url","url":"u"}}]}]}]}`,
			`{"messages":[{"role":"assistant","content":"Calling","reasoning":"hm","tool_calls":[{"id":"t1","type":"function",` +
				`"function":{"name":"f","arguments":"{\"b\": \"\\u00e9\", \"a\": [1, 2.5]}"}}]},` +
				`{"role":"tool","tool_call_id":"t1","content":"r1\nr2"},{"role":"user","content":[{"type":"image_url","image_url":{"url":"u"}}]}]}`},
		{"tools and tool_choice", `{"messages":[],"tools":[{"name":"f","description":"d","input_schema":{"type":"object"}}],"tool_choice":{"type":"any"}}`,
			`{"messages":[],"tools":[{"type":"function","function":{"name":"f","description":"d","parameters":{"type":"object"}}}],"tool_choice":"required"}`},
		{"tools default to auto", `{"messages":[],"tools":[{"name":"f","input_schema":{}}]}`,
			`{"messages":[],"tools":[{"type":"function","function":{"name":"f","parameters":{}}}],"tool_choice":"auto"}`},
	})
}

func TestResponses(t *testing.T) {
	t.Parallel()
	runConv(t, Responses, []convCase{
		{"string input, instructions", `{"model":"m","instructions":"Be brief.","input":"Hi","max_output_tokens":9}`,
			`{"model":"m","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"}]}`},
		{"messages with parts", `{"input":[{"role":"developer","content":"D"},{"type":"message","role":"user","content":[{"type":"input_text","text":"Look"},` +
			`{"type":"input_image","image_url":"https://x/a.png","detail":"auto"}]}]}`,
			`{"messages":[{"role":"developer","content":"D"},{"role":"user","content":[{"type":"text","text":"Look"},` +
				`{"type":"image_url","image_url":{"url":"https://x/a.png"}}]}]}`},
		{"assistant turn merged", `{"input":[{"role":"user","content":"Q"},{"type":"reasoning","summary":[{"type":"summary_text","text":"think"}]},` +
			`{"type":"message","role":"assistant","content":[{"type":"output_text","text":"A"}]},` +
			`{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c1","output":"42"}],` +
			`"tools":[{"type":"function","name":"f","parameters":{"type":"object"}},{"type":"web_search_preview"}]}`,
			`{"messages":[{"role":"user","content":"Q"},{"role":"assistant","reasoning":"think","content":"A",` +
				`"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":"42"}],` +
				`"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}]}`},
	})
}

// What the conversion cannot count is the client's fault, named.
func TestRefusals(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		convert func([]byte) ([]byte, error)
		body    string
		want    string
	}{
		{"encrypted reasoning", Responses, `{"input":[{"type":"reasoning","encrypted_content":"x","summary":[]}]}`, "encrypted reasoning"},
		{"input_file", Responses, `{"input":[{"role":"user","content":[{"type":"input_file","file_id":"f"}]}]}`, `"input_file"`},
		{"unknown item", Responses, `{"input":[{"type":"web_search_call"}]}`, `"web_search_call"`},
		{"messages not an array", Messages, `{"messages":{}}`, "messages body"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := tc.convert([]byte(tc.body))
			require.Error(t, err)
			assert.True(t, errors.Is(err, legs.ErrInvalidRequest), "%v", err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestPythonJSON(t *testing.T) {
	t.Parallel()
	got, err := pythonJSON([]byte(`{"k":"a\"b\\\u0001\u007f😀","n":null,"t":true,"o":{}, "l":[]}`))
	require.NoError(t, err)
	assert.Equal(t, `{"k": "a\"b\\\u0001`+"\x7f"+`\ud83d\ude00", "n": null, "t": true, "o": {}, "l": []}`, got)
}
