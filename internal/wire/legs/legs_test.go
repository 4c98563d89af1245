package legs

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/internal/jsonbody"
)

func TestResolveFormat(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		inbound   Format
		useOpenAI bool
		want      Format
	}{
		{name: "chat with openai format", inbound: FormatChat, useOpenAI: true, want: FormatChat},
		{name: "chat tokens-in", inbound: FormatChat, useOpenAI: false, want: FormatGenerate},
		{name: "completions with openai format", inbound: FormatCompletions, useOpenAI: true, want: FormatCompletions},
		{name: "completions stays completions without openai format", inbound: FormatCompletions, useOpenAI: false, want: FormatCompletions},
		{name: "generate with openai format", inbound: FormatGenerate, useOpenAI: true, want: FormatGenerate},
		{name: "generate tokens-in", inbound: FormatGenerate, useOpenAI: false, want: FormatGenerate},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.want, ResolveFormat(tt.inbound, tt.useOpenAI))
		})
	}
}

func TestCapSingleToken(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		format  Format
		body    string
		want    string // exact bytes
		wantErr bool
	}{
		{
			name:   "chat caps, strips and forces non-streaming in place",
			format: FormatChat,
			body: `{"model":"m","max_tokens":100,"min_tokens":5,"stream":true,"stream_options":{"include_usage":true},` +
				`"max_completion_tokens":100,"messages":[],"top_k":3}`,
			want: `{"model":"m","max_tokens":1,"stream":false,"max_completion_tokens":1,"messages":[],"top_k":3}`,
		},
		{
			name:   "chat adds max_tokens and stream, never max_completion_tokens",
			format: FormatChat,
			body:   `{"model":"m"}`,
			want:   `{"model":"m","max_tokens":1,"stream":false}`,
		},
		{
			name:   "max_output_tokens is capped when present (D11)",
			format: FormatChat,
			body:   `{"max_output_tokens":4096,"max_completion_tokens":null}`,
			want:   `{"max_output_tokens":1,"max_completion_tokens":1,"max_tokens":1,"stream":false}`,
		},
		{
			name:   "completions is capped at the top level",
			format: FormatCompletions,
			body:   `{"prompt":"Hello","max_tokens":16,"min_tokens":2,"stream":false}`,
			want:   `{"prompt":"Hello","max_tokens":1,"stream":false}`,
		},
		{
			name:   "untouched members keep their bytes",
			format: FormatChat,
			body:   `{ "messages" : [ {"content": "caf\u00e9 \ud83d\ude00"} ], "temperature": 1.0E0 , "max_tokens": 7 }`,
			want:   `{"messages":[ {"content": "caf\u00e9 \ud83d\ude00"} ],"temperature":1.0E0,"max_tokens":1,"stream":false}`,
		},
		{
			name:   "generate caps sampling_params and keeps extra_args",
			format: FormatGenerate,
			body: `{"token_ids":[1],"sampling_params":{"max_tokens":50,"min_tokens":3,"temperature":0.5,` +
				`"extra_args":{"kv_transfer_params":{"a":1}}},"stream":true,"stream_options":{}}`,
			want: `{"token_ids":[1],"sampling_params":{"max_tokens":1,"temperature":0.5,` +
				`"extra_args":{"kv_transfer_params":{"a":1}}},"stream":false}`,
		},
		{
			name:   "generate creates sampling_params and a top-level stream",
			format: FormatGenerate,
			body:   `{"token_ids":[1]}`,
			want:   `{"token_ids":[1],"sampling_params":{"max_tokens":1},"stream":false}`,
		},
		{
			name:   "generate replaces null sampling_params",
			format: FormatGenerate,
			body:   `{"sampling_params":null}`,
			want:   `{"sampling_params":{"max_tokens":1},"stream":false}`,
		},
		{
			name:   "generate leaves top-level max_tokens alone but caps max_completion_tokens",
			format: FormatGenerate,
			body:   `{"max_tokens":9,"min_tokens":2,"max_completion_tokens":9}`,
			want:   `{"max_tokens":9,"min_tokens":2,"max_completion_tokens":1,"sampling_params":{"max_tokens":1},"stream":false}`,
		},
		{
			name:    "generate with non-object sampling_params is a client error",
			format:  FormatGenerate,
			body:    `{"sampling_params":[1]}`,
			wantErr: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			obj, err := jsonbody.ParseObject([]byte(tt.body))
			require.NoError(t, err)
			err = CapSingleToken(obj, tt.format)
			if tt.wantErr {
				assert.ErrorIs(t, err, ErrInvalidRequest)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, string(obj.Bytes()))
		})
	}
}

func TestAnswerParams(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		status  int
		body    string
		want    string // "" means nil
		wantErr string
	}{
		{name: "object", status: 200, body: `{"id":"x","kv_transfer_params":{"remote_block_ids":["1"],"tp_size":2}}`, want: `{"remote_block_ids":["1"],"tp_size":2}`},
		{name: "empty object is kept", status: 200, body: `{"kv_transfer_params":{}}`, want: `{}`},
		{name: "inner bytes are kept", status: 200, body: `{"kv_transfer_params": { "n" : 1.50 } }`, want: `{ "n" : 1.50 }`},
		{name: "last duplicate wins", status: 200, body: `{"kv_transfer_params":{"a":1},"kv_transfer_params":{"b":2}}`, want: `{"b":2}`},
		{name: "null", status: 200, body: `{"kv_transfer_params":null}`},
		{name: "string", status: 200, body: `{"kv_transfer_params":"x"}`},
		{name: "array", status: 200, body: `{"kv_transfer_params":[{"a":1}]}`},
		{name: "absent", status: 200, body: `{"choices":[]}`},
		{name: "other 2xx", status: 201, body: `{"kv_transfer_params":{"a":1}}`, want: `{"a":1}`},
		{name: "no content", status: 204},
		{name: "event stream", status: 200, body: "data: {\"kv_transfer_params\":{}}\n\n", wantErr: "prefill: decode answer:"},
		{name: "not an object", status: 200, body: `[{"kv_transfer_params":{}}]`, wantErr: "prefill: decode answer:"},
		{name: "empty body", status: 200, body: ``, wantErr: "prefill: decode answer:"},
		{name: "truncated", status: 200, body: `{"kv_transfer_params":{"a":`, wantErr: "prefill: decode answer:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			resp := &http.Response{StatusCode: tt.status, Body: io.NopCloser(strings.NewReader(tt.body))}
			got, err := AnswerParams(resp, "prefill", "kv_transfer_params")
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				assert.NotErrorIs(t, err, ErrInvalidRequest)
				return
			}
			require.NoError(t, err)
			if tt.want == "" {
				assert.Nil(t, got)
				return
			}
			assert.Equal(t, tt.want, string(got))
		})
	}
}
