package builtin_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/internal/gateway"
	"github.com/coordinator-project/coordinator/internal/headers"
	"github.com/coordinator-project/coordinator/internal/wire/features"
	"github.com/coordinator-project/coordinator/internal/wire/legs"
	"github.com/coordinator-project/coordinator/steps"
	"github.com/coordinator-project/coordinator/steps/steptest"
)

// fullChatAnswer is a chat render answer with two images.
const fullChatAnswer = `{"request_id":"chatcmpl-1","token_ids":[1,32000,32000,32000,32000,32000,32000,2345,6789],` +
	`"features":{"mm_hashes":{"image":["vllm-hash-a","vllm-hash-b"]},` +
	`"mm_placeholders":{"image":[{"offset":1,"length":3},{"offset":4,"length":3}]},` +
	`"kwargs_data":{"image":["dGVuc29yLWE=","dGVuc29yLWI="]}},` +
	`"sampling_params":{"temperature":0.7,"max_tokens":262060},"model":"gpt-4o","stream":false,"kv_transfer_params":null}`

func TestRenderChatParsesFullAnswer(t *testing.T) {
	t.Parallel()
	srv := renderServer(t, http.StatusOK, fullChatAnswer)
	body := `{"model":"gpt-4o", "messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,AA"}},` +
		`{"type":"image_url","image_url":{"url":"data:image/png;base64,BB"}}]}], "top_k": 5}`
	rc := &steps.RequestContext{
		RequestID: "req-1", Format: legs.FormatChat, Body: []byte(body),
		Header: headers.NewForwarded("authorization", "Bearer t", "x-custom", "v"),
		Multimodal: []features.MultimodalEntry{
			{Index: 0, ContentType: "image/png", Base64Data: "AA"},
			{Index: 1, ContentType: "image/png", Base64Data: "BB"},
		},
	}
	require.NoError(t, newRender(t, srv.URL, nil).Execute(context.Background(), rc))

	sentLegs := srv.Legs()
	require.Len(t, sentLegs, 1)
	leg := sentLegs[0]
	assert.Equal(t, http.MethodPost, leg.Method)
	assert.Equal(t, "/v1/chat/completions/render", leg.Path)
	assert.Equal(t, body, string(leg.Body), "render gets the body as it stands, byte for byte")
	assert.Equal(t, "application/json", leg.Header.Get("Content-Type"))
	assert.Equal(t, "req-1", leg.Header.Get("X-Request-Id"), "the validated id (D5)")
	assert.Equal(t, "Bearer t", leg.Header.Get("Authorization"))
	assert.Equal(t, "v", leg.Header.Get("X-Custom"))
	assert.Empty(t, leg.Header.Values("Epp-Profile"), "render is not a gateway leg")
	assert.Empty(t, leg.Header.Values("Prefer"))

	assert.Equal(t, []uint32{1, 32000, 32000, 32000, 32000, 32000, 32000, 2345, 6789}, rc.Tokens.IDs())
	assert.Equal(t, []features.MultimodalEntry{
		{Index: 0, ContentType: "image/png", Base64Data: "AA", Hash: "vllm-hash-a", KwargsData: json.RawMessage(`"dGVuc29yLWE="`),
			Placeholder: features.Placeholder{Offset: 1, Length: 3}},
		{Index: 1, ContentType: "image/png", Base64Data: "BB", Hash: "vllm-hash-b", KwargsData: json.RawMessage(`"dGVuc29yLWI="`),
			Placeholder: features.Placeholder{Offset: 4, Length: 3}},
	}, rc.Multimodal)
	assert.Equal(t, body, string(editedBody(rc)), "the chat body is not edited")
}

func TestRenderChatTextOnly(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		answer string
	}{
		{name: "empty image arrays", answer: `{"token_ids":[1,2345,6789],"features":{"mm_hashes":{"image":[]},"mm_placeholders":{"image":[]},"kwargs_data":{"image":[]}}}`},
		{name: "null features", answer: `{"token_ids":[1,2345,6789],"features":null}`},
		{name: "no features", answer: `{"token_ids":[1,2345,6789]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := renderServer(t, http.StatusOK, tt.answer)
			rc := &steps.RequestContext{RequestID: "r", Format: legs.FormatChat, Body: []byte(`{"model":"test","messages":[{"role":"user","content":"hi"}]}`)}
			require.NoError(t, newRender(t, srv.URL, nil).Execute(context.Background(), rc))
			assert.Len(t, srv.Legs(), 1, "render runs even without images")
			assert.Equal(t, []uint32{1, 2345, 6789}, rc.Tokens.IDs())
			assert.Empty(t, rc.Multimodal)
		})
	}
}

// TestRenderChatSeedsEntries covers decision D7: without replace-media-urls
// no entries are seeded, and render's images become the entries.
func TestRenderChatSeedsEntries(t *testing.T) {
	t.Parallel()
	srv := renderServer(t, http.StatusOK, fullChatAnswer)
	rc := &steps.RequestContext{RequestID: "r", Format: legs.FormatChat, Body: []byte(`{"model":"gpt-4o","messages":[]}`)}
	require.NoError(t, newRender(t, srv.URL, nil).Execute(context.Background(), rc))
	assert.Equal(t, []features.MultimodalEntry{
		{Index: 0, Hash: "vllm-hash-a", KwargsData: json.RawMessage(`"dGVuc29yLWE="`), Placeholder: features.Placeholder{Offset: 1, Length: 3}},
		{Index: 1, Hash: "vllm-hash-b", KwargsData: json.RawMessage(`"dGVuc29yLWI="`), Placeholder: features.Placeholder{Offset: 4, Length: 3}},
	}, rc.Multimodal)
}

func TestRenderChatImageCountMismatch(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		answer  string
		seeded  int
		wantErr string
	}{
		{name: "fewer images rendered", answer: fullChatAnswer, seeded: 3, wantErr: "render returned 2 mm_hashes but expected 3"},
		{name: "more images rendered", answer: fullChatAnswer, seeded: 1, wantErr: "render returned 2 mm_hashes but expected 1"},
		{name: "no images rendered", answer: `{"token_ids":[1,2],"features":null}`, seeded: 1, wantErr: "render returned 0 mm_hashes but expected 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := renderServer(t, http.StatusOK, tt.answer)
			seeded := make([]features.MultimodalEntry, tt.seeded)
			for i := range seeded {
				seeded[i].Index = i
			}
			rc := &steps.RequestContext{RequestID: "r", Format: legs.FormatChat, Body: []byte(`{"messages":[]}`), Multimodal: seeded}
			err := newRender(t, srv.URL, nil).Execute(context.Background(), rc)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.wantErr)
			assert.NotErrorIs(t, err, legs.ErrInvalidRequest, "a mismatch is render's fault (502)")
			assert.Equal(t, seeded, rc.Multimodal, "the entries are left as they were")
			assert.Nil(t, rc.Tokens.IDs())
		})
	}
}

func TestRenderLimits(t *testing.T) {
	t.Parallel()
	twoImages := func(l0, l1 string) string {
		return `{"token_ids":[1,100,100,100,100,100,100,100,200],"features":{"mm_hashes":{"image":["h0","h1"]},` +
			`"mm_placeholders":{"image":[{"offset":1,"length":` + l0 + `},{"offset":5,"length":` + l1 + `}]},"kwargs_data":{"image":["AAAA","AAAA"]}}}`
	}
	const maxInt = "9223372036854775807"
	tests := []struct {
		name    string
		format  legs.Format
		body    string
		answer  string // "" when render is not called
		params  map[string]any
		wantErr string // "" for success
	}{
		{name: "chat over the token limit", format: legs.FormatChat, answer: `{"token_ids":[1,2,3,4,5,6,7,8,9,10]}`,
			params: map[string]any{"max_total_tokens": 5}, wantErr: "too many total tokens: got 10, max 5"},
		{name: "chat at the token limit", format: legs.FormatChat, answer: `{"token_ids":[1,2,3,4,5]}`,
			params: map[string]any{"max_total_tokens": 5}},
		{name: "completions string over the token limit", format: legs.FormatCompletions, body: `{"prompt":"some text"}`,
			answer: `[{"token_ids":[1,2,3,4,5,6,7]}]`, params: map[string]any{"max_total_tokens": 4}, wantErr: "too many total tokens: got 7, max 4"},
		{name: "completions token array over the token limit", format: legs.FormatCompletions, body: `{"prompt":[1,2,3]}`,
			params: map[string]any{"max_total_tokens": 2}, wantErr: "too many total tokens: got 3, max 2"},
		{name: "token limit before token validation", format: legs.FormatCompletions, body: `{"prompt":[1,2,"x"]}`,
			params: map[string]any{"max_total_tokens": 2}, wantErr: "too many total tokens: got 3, max 2"},
		{name: "generate over the token limit", format: legs.FormatGenerate, body: `{"token_ids":[1,2,3]}`,
			params: map[string]any{"max_total_tokens": 2}, wantErr: "too many total tokens: got 3, max 2"},
		{name: "chat over the placeholder limit", format: legs.FormatChat, answer: twoImages("4", "3"),
			params: map[string]any{"max_total_placeholder_tokens": 5}, wantErr: "too many placeholder tokens: got 7, max 5"},
		{name: "chat at the placeholder limit", format: legs.FormatChat, answer: twoImages("2", "3"),
			params: map[string]any{"max_total_placeholder_tokens": 5}},
		{name: "placeholder sum overflow", format: legs.FormatChat, answer: twoImages(maxInt, maxInt),
			params: map[string]any{"max_total_placeholder_tokens": 5}, wantErr: "too many placeholder tokens"},
		{name: "no placeholder limit by default", format: legs.FormatChat, answer: twoImages("4", "3")},
		{name: "generate over the placeholder limit", format: legs.FormatGenerate,
			body:   `{"token_ids":[1,2,3,4,5,6],"features":{"mm_hashes":{"image":["a","b"]},"mm_placeholders":{"image":[{"offset":0,"length":3},{"offset":3,"length":3}]}}}`,
			params: map[string]any{"max_total_placeholder_tokens": 5}, wantErr: "too many placeholder tokens: got 6, max 5"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := renderServer(t, http.StatusOK, tt.answer)
			body := tt.body
			if body == "" {
				body = `{"model":"test","messages":[]}`
			}
			rc := &steps.RequestContext{RequestID: "r", Format: tt.format, Body: []byte(body)}
			err := newRender(t, srv.URL, tt.params).Execute(context.Background(), rc)
			if tt.answer == "" {
				assert.Empty(t, srv.Legs(), "render is not called")
			}
			if tt.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, legs.ErrInvalidRequest)
			assert.Contains(t, err.Error(), tt.wantErr)
			assert.Equal(t, body, string(editedBody(rc)), "a rejected prompt is not rewritten")
		})
	}
}

// TestRenderUpstreamStatus: a non-2xx answer is an *gateway.StatusError
// with render's status (4xx reach the client, 5xx become 502), never a
// client fault; any 2xx is success (D9).
func TestRenderUpstreamStatus(t *testing.T) {
	t.Parallel()
	for _, format := range []legs.Format{legs.FormatChat, legs.FormatCompletions} {
		for _, status := range []int{http.StatusBadRequest, http.StatusNotFound, http.StatusUnprocessableEntity,
			http.StatusTooManyRequests, http.StatusInternalServerError, http.StatusServiceUnavailable} {
			t.Run(format.String()+"/"+http.StatusText(status), func(t *testing.T) {
				t.Parallel()
				srv := renderServer(t, status, `{"error":{"message":"bad tokens"}}`)
				rc := &steps.RequestContext{RequestID: "r", Format: format, Body: []byte(`{"model":"m","messages":[],"prompt":"hi"}`)}
				err := newRender(t, srv.URL, nil).Execute(context.Background(), rc)
				var se *gateway.StatusError
				require.ErrorAs(t, err, &se)
				assert.Equal(t, status, se.StatusCode)
				assert.Equal(t, "render", se.Leg)
				assert.False(t, se.Relay, "render's body never reaches the client")
				assert.NotErrorIs(t, err, legs.ErrInvalidRequest)
				assert.Nil(t, rc.Tokens.IDs())
			})
		}
	}
	for _, status := range []int{http.StatusCreated, http.StatusAccepted, http.StatusNonAuthoritativeInfo} {
		t.Run("success/"+http.StatusText(status), func(t *testing.T) {
			t.Parallel()
			srv := renderServer(t, status, `{"token_ids":[7]}`)
			rc := &steps.RequestContext{RequestID: "r", Format: legs.FormatChat, Body: []byte(`{"messages":[]}`)}
			require.NoError(t, newRender(t, srv.URL, nil).Execute(context.Background(), rc))
			assert.Equal(t, []uint32{7}, rc.Tokens.IDs())
		})
	}
}

// TestRenderMalformedAnswer: an answer the step cannot use is render's
// fault, a plain error (502).
func TestRenderMalformedAnswer(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		format  legs.Format
		status  int
		answer  string
		wantErr string
	}{
		{name: "chat: not JSON", format: legs.FormatChat, answer: `oops`, wantErr: "render: decode answer"},
		{name: "chat: empty 204", format: legs.FormatChat, status: http.StatusNoContent, answer: ``, wantErr: "render: decode answer"},
		{name: "chat: an array", format: legs.FormatChat, answer: `[{"token_ids":[1]}]`, wantErr: "render: decode answer"},
		{name: "chat: no token_ids", format: legs.FormatChat, answer: `{"features":null}`, wantErr: "token_ids missing"},
		{name: "chat: null token_ids", format: legs.FormatChat, answer: `{"token_ids":null}`, wantErr: "token_ids"},
		{name: "chat: string token", format: legs.FormatChat, answer: `{"token_ids":[1,"2"]}`, wantErr: "token_ids: index 1"},
		{name: "chat: negative token", format: legs.FormatChat, answer: `{"token_ids":[-1]}`, wantErr: "token_ids: index 0"},
		{name: "chat: token past 32 bits", format: legs.FormatChat, answer: `{"token_ids":[4294967296]}`, wantErr: "token_ids: index 0"},
		{name: "chat: features not an object", format: legs.FormatChat, answer: `{"token_ids":[1],"features":"x"}`, wantErr: "features must be an object"},
		{name: "completions: not JSON", format: legs.FormatCompletions, answer: `{`, wantErr: "render: decode answer"},
		{name: "completions: an object", format: legs.FormatCompletions, answer: `{"token_ids":[1]}`, wantErr: "render: decode answer"},
		{name: "completions: empty array", format: legs.FormatCompletions, answer: `[]`, wantErr: "expected 1 answer element, got 0"},
		{name: "completions: two elements", format: legs.FormatCompletions, answer: `[{"token_ids":[1]},{"token_ids":[2]}]`, wantErr: "expected 1 answer element, got 2"},
		{name: "completions: element not an object", format: legs.FormatCompletions, answer: `[[1,2]]`, wantErr: "render: decode answer"},
		{name: "completions: no token_ids", format: legs.FormatCompletions, answer: `[{"model":"m"}]`, wantErr: "token_ids missing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			status := tt.status
			if status == 0 {
				status = http.StatusOK
			}
			srv := renderServer(t, status, tt.answer)
			body := `{"model":"m","messages":[],"prompt":"hi"}`
			rc := &steps.RequestContext{RequestID: "r", Format: tt.format, Body: []byte(body)}
			err := newRender(t, srv.URL, nil).Execute(context.Background(), rc)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.wantErr)
			assert.NotErrorIs(t, err, legs.ErrInvalidRequest)
			var se *gateway.StatusError
			assert.False(t, errors.As(err, &se))
			assert.Nil(t, rc.Tokens.IDs())
			assert.Equal(t, body, string(editedBody(rc)))
		})
	}
}

func TestRenderTransportErrors(t *testing.T) {
	t.Parallel()
	t.Run("unreachable", func(t *testing.T) {
		t.Parallel()
		srv := renderServer(t, http.StatusOK, `{}`)
		srv.Close()
		rc := &steps.RequestContext{RequestID: "r", Format: legs.FormatChat, Body: []byte(`{"messages":[]}`)}
		err := newRender(t, srv.URL, nil).Execute(context.Background(), rc)
		var te *gateway.TransportError
		require.ErrorAs(t, err, &te)
		assert.Equal(t, "render", te.Leg)
	})
	t.Run("timeout covers the answer body", func(t *testing.T) {
		t.Parallel()
		srv := streamingRender(t)
		rc := &steps.RequestContext{RequestID: "r", Format: legs.FormatChat, Body: []byte(`{"messages":[]}`)}
		err := newRender(t, srv.URL, map[string]any{"timeout": "20ms"}).Execute(context.Background(), rc)
		var te *gateway.TransportError
		require.ErrorAs(t, err, &te)
		assert.True(t, te.Timeout(), "a stalled body times out: %v", err)
	})
	t.Run("cancelled while reading the answer", func(t *testing.T) {
		t.Parallel()
		started := make(chan struct{})
		srv := steptest.NewGateway(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"token_ids":[1,`))
			w.(http.Flusher).Flush()
			close(started)
			<-r.Context().Done()
		})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() {
			<-started
			cancel()
		}()
		rc := &steps.RequestContext{RequestID: "r", Format: legs.FormatChat, Body: []byte(`{"messages":[]}`)}
		err := newRender(t, srv.URL, nil).Execute(ctx, rc)
		assert.ErrorIs(t, err, context.Canceled)
		var te *gateway.TransportError
		assert.False(t, errors.As(err, &te), "a cancelled request is not a transport failure")
	})
}

// streamingRender answers 200 and half a body, then stalls until the client
// goes away.
func streamingRender(t *testing.T) *steptest.Gateway {
	t.Helper()
	return steptest.NewGateway(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"token_ids":[1,`))
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
}

func TestRenderCompletionsStringPrompt(t *testing.T) {
	t.Parallel()
	srv := renderServer(t, http.StatusOK, `[{"request_id":"cmpl-1","token_ids":[1,2345,6789],"features":null,"sampling_params":{"max_tokens":5}}]`)
	body := `{"model":"test", "prompt":"Hello, world!", "max_tokens": 5, "logit_bias": {"1" : 1.50}}`
	rc := &steps.RequestContext{RequestID: "req-2", Format: legs.FormatCompletions, Body: []byte(body),
		Header: headers.NewForwarded("authorization", "Bearer t")}
	require.NoError(t, newRender(t, srv.URL, nil).Execute(context.Background(), rc))

	sentLegs := srv.Legs()
	require.Len(t, sentLegs, 1)
	assert.Equal(t, "/v1/completions/render", sentLegs[0].Path)
	assert.Equal(t, body, string(sentLegs[0].Body))
	assert.Equal(t, "req-2", sentLegs[0].Header.Get("X-Request-Id"))
	assert.Equal(t, "Bearer t", sentLegs[0].Header.Get("Authorization"))
	assert.Equal(t, []uint32{1, 2345, 6789}, rc.Tokens.IDs())
	assert.Equal(t, `{"model":"test","prompt":[1,2345,6789],"max_tokens":5,"logit_bias":{"1" : 1.50}}`, string(editedBody(rc)),
		"only prompt changes; every other value keeps its bytes")
}

func TestRenderCompletionsTokenPrompt(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		prompt  string
		want    []uint32
		wantErr string
	}{
		{name: "token array", prompt: `[1,2345,6789]`, want: []uint32{1, 2345, 6789}},
		{name: "full 32-bit range (D16)", prompt: `[0,4294967295]`, want: []uint32{0, 4294967295}},
		{name: "integral spellings", prompt: `[1.0,2e0,30E-1]`, want: []uint32{1, 2, 3}},
		{name: "empty array", prompt: `[]`, want: []uint32{}},
		{name: "negative token", prompt: `[1,-2]`, wantErr: "invalid token at index 1"},
		{name: "fractional token", prompt: `[1,2,2.5]`, wantErr: "invalid token at index 2"},
		{name: "token past 32 bits", prompt: `[4294967296]`, wantErr: "invalid token at index 0"},
		{name: "string among tokens", prompt: `[1,"a"]`, wantErr: "invalid token at index 1"},
		{name: "null among tokens", prompt: `[1,null]`, wantErr: "invalid token at index 1"},
		{name: "array among tokens", prompt: `[1,[2]]`, wantErr: "invalid token at index 1"},
		{name: "batched strings", prompt: `["a","b"]`, wantErr: "batched string prompts are not supported"},
		{name: "batched token arrays", prompt: `[[1,2],[3]]`, wantErr: "batched token prompts are not supported"},
		{name: "array of bools", prompt: `[true]`, wantErr: "invalid prompt array element"},
		{name: "array of objects", prompt: `[{}]`, wantErr: "invalid prompt array element"},
		{name: "array of nulls", prompt: `[null]`, wantErr: "invalid prompt array element"},
		{name: "number", prompt: `42`, wantErr: "prompt must be a string or token array"},
		{name: "object", prompt: `{"text":"hi"}`, wantErr: "prompt must be a string or token array"},
		{name: "null", prompt: `null`, wantErr: "prompt must be a string or token array"},
		{name: "bool", prompt: `true`, wantErr: "prompt must be a string or token array"},
		{name: "missing", prompt: ``, wantErr: "prompt must be a string or token array"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := renderServer(t, http.StatusOK, `[{"token_ids":[9]}]`)
			body := `{"model":"test"}`
			if tt.prompt != "" {
				body = `{"model":"test","prompt":` + tt.prompt + `}`
			}
			rc := &steps.RequestContext{RequestID: "r", Format: legs.FormatCompletions, Body: []byte(body)}
			err := newRender(t, srv.URL, nil).Execute(context.Background(), rc)
			assert.Empty(t, srv.Legs(), "only a string prompt is rendered")
			assert.Equal(t, body, string(editedBody(rc)), "the body is left untouched")
			if tt.wantErr != "" {
				require.ErrorIs(t, err, legs.ErrInvalidRequest)
				assert.Contains(t, err.Error(), tt.wantErr)
				assert.Nil(t, rc.Tokens.IDs())
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, rc.Tokens.IDs())
		})
	}
}

func TestRenderRejectsMalformedBodies(t *testing.T) {
	t.Parallel()
	for _, format := range []legs.Format{legs.FormatCompletions, legs.FormatGenerate} {
		t.Run(format.String(), func(t *testing.T) {
			t.Parallel()
			rc := &steps.RequestContext{RequestID: "r", Format: format, Body: []byte(`{"prompt":`)}
			err := newRender(t, "http://127.0.0.1:1", nil).Execute(context.Background(), rc)
			assert.ErrorIs(t, err, legs.ErrInvalidRequest)
		})
	}
}

func TestRenderGenerate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		body    string
		wantIDs []uint32
		want    []features.MultimodalEntry
		wantErr string
	}{
		{name: "text only", body: `{"model":"m","token_ids":[1,2345,6789],"sampling_params":{"max_tokens":50}}`, wantIDs: []uint32{1, 2345, 6789}},
		{name: "null features", body: `{"token_ids":[1,2],"features":null}`, wantIDs: []uint32{1, 2}},
		{name: "null sampling params and extra args", body: `{"token_ids":[1],"sampling_params":null}`, wantIDs: []uint32{1}},
		{name: "null extra args", body: `{"token_ids":[1],"sampling_params":{"extra_args":null}}`, wantIDs: []uint32{1}},
		{name: "object extra args", body: `{"token_ids":[1],"sampling_params":{"extra_args":{"k":1}}}`, wantIDs: []uint32{1}},
		{
			name:    "one image",
			body:    `{"token_ids":[1,32000,32000,32000,2],"features":{"mm_hashes":{"image":["abc"]},"mm_placeholders":{"image":[{"offset":1,"length":3}]},"kwargs_data":{"image":["dGVuc29y"]}}}`,
			wantIDs: []uint32{1, 32000, 32000, 32000, 2},
			want:    []features.MultimodalEntry{entry(0, "abc", `"dGVuc29y"`, 1, 3)},
		},
		{
			name: "two images, one from the encoder cache",
			body: `{"token_ids":[1,9,9,9,8,8,8,2],"features":{"mm_hashes":{"image":["a","b"]},` +
				`"mm_placeholders":{"image":[{"offset":1,"length":3},{"offset":4,"length":3}]},"kwargs_data":{"image":[null,"dA=="]}}}`,
			wantIDs: []uint32{1, 9, 9, 9, 8, 8, 8, 2},
			want:    []features.MultimodalEntry{entry(0, "a", `null`, 1, 3), entry(1, "b", `"dA=="`, 4, 3)},
		},
		{name: "full 32-bit token range (D16)", body: `{"token_ids":[4294967295]}`, wantIDs: []uint32{4294967295}},
		{name: "missing token_ids", body: `{"model":"m"}`, wantErr: "token_ids is required"},
		{name: "null token_ids", body: `{"token_ids":null}`, wantErr: "token_ids is required"},
		{name: "string token_ids", body: `{"token_ids":"1 2"}`, wantErr: "token_ids must be an array"},
		{name: "empty token_ids", body: `{"token_ids":[]}`, wantErr: "token_ids must not be empty"},
		{name: "negative token", body: `{"token_ids":[1,-1]}`, wantErr: "token_ids: index 1"},
		{name: "fractional token", body: `{"token_ids":[1.5]}`, wantErr: "token_ids: index 0"},
		{name: "token past 32 bits", body: `{"token_ids":[4294967296]}`, wantErr: "token_ids: index 0"},
		{name: "sampling params array", body: `{"token_ids":[1],"sampling_params":[1]}`, wantErr: "sampling_params must be an object"},
		{name: "sampling params string", body: `{"token_ids":[1],"sampling_params":"x"}`, wantErr: "sampling_params must be an object"},
		{name: "extra args array", body: `{"token_ids":[1],"sampling_params":{"extra_args":[]}}`, wantErr: "sampling_params.extra_args must be an object"},
		{name: "extra args string", body: `{"token_ids":[1],"sampling_params":{"extra_args":"x"}}`, wantErr: "sampling_params.extra_args must be an object"},
		{name: "features string", body: `{"token_ids":[1],"features":"x"}`, wantErr: "features must be an object"},
		{name: "features array", body: `{"token_ids":[1],"features":[]}`, wantErr: "features must be an object"},
		{name: "features number", body: `{"token_ids":[1],"features":3}`, wantErr: "features must be an object"},
		{
			name:    "placeholder offset past the prompt",
			body:    `{"token_ids":[1,2,3,4],"features":{"mm_hashes":{"image":["a"]},"mm_placeholders":{"image":[{"offset":5,"length":1}]}}}`,
			wantErr: "offset 5 out of range for 4 token_ids",
		},
		{
			name:    "placeholder length 2^53",
			body:    `{"token_ids":[1,2,3,4],"features":{"mm_hashes":{"image":["a"]},"mm_placeholders":{"image":[{"offset":1,"length":9007199254740992}]}}}`,
			wantErr: "exceeds 4 token_ids",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := renderServer(t, http.StatusOK, `{}`)
			rc := &steps.RequestContext{RequestID: "r", Format: legs.FormatGenerate, Body: []byte(tt.body)}
			err := newRender(t, srv.URL, nil).Execute(context.Background(), rc)
			assert.Empty(t, srv.Legs(), "generate never calls render")
			assert.Equal(t, tt.body, string(editedBody(rc)), "the body is left untouched")
			if tt.wantErr != "" {
				require.ErrorIs(t, err, legs.ErrInvalidRequest)
				assert.Contains(t, err.Error(), tt.wantErr)
				assert.Nil(t, rc.Tokens.IDs())
				assert.Nil(t, rc.Multimodal)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.wantIDs, rc.Tokens.IDs())
			assert.Equal(t, tt.want, rc.Multimodal)
		})
	}
}

func TestRenderSkipsOtherAPIs(t *testing.T) {
	t.Parallel()
	srv := renderServer(t, http.StatusOK, `{}`)
	rc := &steps.RequestContext{RequestID: "r", Body: []byte(`{"input":"x"}`)}
	require.NoError(t, newRender(t, srv.URL, nil).Execute(context.Background(), rc))
	assert.Empty(t, srv.Legs())
	assert.Nil(t, rc.Tokens.IDs())
}
