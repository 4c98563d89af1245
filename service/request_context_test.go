package service

import (
	"context"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
	"github.com/coordinator-project/coordinator/internal/frontdoor"
	"github.com/coordinator-project/coordinator/internal/requestbody"
	"github.com/coordinator-project/coordinator/internal/wire/legs"
)

func TestNewRequestContextReadsOnlyUnambiguousBodies(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		body   string
		stream bool
		err    string // "" when accepted
	}{
		{name: "stream true", body: `{"model":"m","stream":true}`, stream: true},
		{name: "stream null is false", body: `{"stream":null}`},
		{name: "no stream", body: `{"model":"m"}`},
		// vLLM reads these as true: the answer is framed as the worker sends it.
		{name: "stream as a string", body: `{"stream":"true"}`, stream: true},
		{name: "stream as a number", body: `{"stream":1}`, stream: true},
		{name: "stream as yes", body: `{"stream":"Yes"}`, stream: true},
		{name: "stream as off", body: `{"stream":"off"}`},
		{name: "stream as 2", body: `{"stream":2}`, err: `"stream" must be a boolean`},
		{name: "stream as a word", body: `{"stream":"sure"}`, err: `"stream" must be a boolean`},
		{name: "duplicate stream", body: `{"stream":false,"model":"m","stream":true}`, err: `duplicate key "stream"`},
		{name: "duplicate by escape", body: `{"model":"a","m\u006fdel":"b"}`, err: `duplicate key "model"`},
		{name: "duplicate unknown key", body: `{"x":1,"x":2}`, err: `duplicate key "x"`},
		{name: "nested duplicates are the worker's", body: `{"sampling_params":{"n":1,"n":2}}`},
		{name: "invalid UTF-8 names the member", body: "{\"messages\":[{\"content\":\"\xff\"}]}", err: "invalid UTF-8 in string literal at offset 25 (in messages[0].content)"},
		{name: "too deep", body: `{"a":` + nestedArrays(600) + `}`, err: "json nesting exceeds max depth (512)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rc, err := newRequestContext(context.Background(), "req-1", &coordinatorv1.OpenAIRequest{
				Endpoint: coordinatorv1.Endpoint_ENDPOINT_CHAT_COMPLETIONS, Json: []byte(tt.body),
			}, requestbody.Limits{}, nil)
			if tt.err == "" {
				require.NoError(t, err)
				assert.Equal(t, tt.stream, rc.Stream)
				return
			}
			st := status.Convert(err)
			assert.Equal(t, codes.InvalidArgument, st.Code())
			assert.Contains(t, st.Message(), tt.err)
			assert.Contains(t, st.Message(), "(request_id: req-1)")
		})
	}
}

// nestedArrays is n nested arrays.
func nestedArrays(n int) string {
	b := make([]byte, 0, 2*n)
	for range n {
		b = append(b, '[')
	}
	for range n {
		b = append(b, ']')
	}
	return string(b)
}

func TestNewRequestContextTakesTheFrontsDocument(t *testing.T) {
	t.Parallel()
	body := []byte(`{"model":"m","stream":true,"messages":[]}`)
	doc, err := requestbody.Parse(body, legs.FormatChat)
	require.NoError(t, err)
	ctx := frontdoor.With(context.Background(), &frontdoor.Call{Doc: doc})
	in := &coordinatorv1.OpenAIRequest{Endpoint: coordinatorv1.Endpoint_ENDPOINT_CHAT_COMPLETIONS, Json: body}

	rc, err := newRequestContext(ctx, "r", in, requestbody.Limits{}, nil)
	require.NoError(t, err)
	assert.Same(t, doc, rc.Doc, "the very bytes the front parsed: its document")
	assert.Equal(t, "m", rc.Model)
	assert.True(t, rc.Stream)

	in.Json = slices.Clone(body)
	rc, err = newRequestContext(ctx, "r", in, requestbody.Limits{}, nil)
	require.NoError(t, err)
	assert.NotSame(t, doc, rc.Doc, "a copy of the bytes is parsed anew")
	assert.True(t, rc.Doc.Of(in.Json))

	in.Json, in.Endpoint = body, coordinatorv1.Endpoint_ENDPOINT_COMPLETIONS
	rc, err = newRequestContext(ctx, "r", in, requestbody.Limits{}, nil)
	require.NoError(t, err)
	assert.NotSame(t, doc, rc.Doc, "another format's document is not taken")
	assert.Equal(t, legs.FormatCompletions, rc.Doc.Format())

	bad := []byte(`{"model":`)
	rc, err = newRequestContext(frontdoor.With(context.Background(), &frontdoor.Call{Doc: doc}), "r", &coordinatorv1.OpenAIRequest{Json: bad}, requestbody.Limits{}, nil)
	assert.Nil(t, rc)
	assert.ErrorContains(t, err, "invalid JSON body", "a body that is not the document's is still checked")
}
