package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
)

// sse is a stream of n chat chunks, then tail.
func sse(n int, tail string) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"t%d\"}}]}\n\n", i)
	}
	return b.String() + tail
}

func TestReadEvents(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		body       io.Reader
		chunks     int
		done       bool
		errorEvent int
		content    string // "" for none
		err        bool
	}{
		{name: "whole stream", body: strings.NewReader(sse(streamChunks, "data: [DONE]\n\n")), chunks: streamChunks, done: true},
		{name: "too few chunks", body: strings.NewReader(sse(3, "data: [DONE]\n\n")), chunks: 3, done: true, content: "want 17 chunks"},
		{name: "final error event", body: strings.NewReader(sse(2, "data: {\"error\":{\"message\":\"decode unreachable\",\"type\":\"x\",\"param\":null,\"code\":502}}\n\n")),
			chunks: 2, errorEvent: 502},
		{name: "error event not an error object", body: strings.NewReader(sse(1, "data: {\"error\":\"x\"}\n\n")),
			chunks: 1, errorEvent: 1, content: "not an OpenAI error object"},
		{name: "data after [DONE]", body: strings.NewReader(sse(streamChunks, "data: [DONE]\n\n"+sse(1, ""))),
			chunks: streamChunks, done: true, content: "data after the end of the stream"},
		{name: "not a chunk", body: strings.NewReader("data: hello\n\n"), chunks: 1, content: "not a completion chunk"},
		{name: "ends without an end", body: strings.NewReader(sse(4, "")), chunks: 4},
		{name: "cut by a read error", body: io.MultiReader(strings.NewReader(sse(1, "")), iotest.ErrReader(io.ErrUnexpectedEOF)), chunks: 1, err: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var o observation
			err := readEvents(tt.body, &o, nil)
			if tt.err {
				require.Error(t, err)
			} else {
				require.NoError(t, err)
			}
			assert.Equal(t, tt.chunks, o.chunks, "chunks")
			assert.Equal(t, tt.done, o.done, "done")
			assert.Equal(t, tt.errorEvent, o.errorEvent, "error event")
			if tt.content == "" {
				assert.NoError(t, o.content)
			} else {
				assert.ErrorContains(t, o.content, tt.content)
			}
		})
	}
}

func TestReadEventsDisconnectsAfterTheFirstChunk(t *testing.T) {
	t.Parallel()
	var o observation
	calls := 0
	require.NoError(t, readEvents(strings.NewReader(sse(3, "")), &o, func() {
		calls++
		assert.Equal(t, 1, o.chunks, "called once the first chunk is counted")
	}))
	assert.Equal(t, 1, calls)
}

func TestCheckErrorBody(t *testing.T) {
	t.Parallel()
	assert.NoError(t, checkErrorBody(504, []byte(`{"error":{"message":"prefill timed out","type":"x","param":null,"code":504}}`)))
	assert.ErrorContains(t, checkErrorBody(502, []byte(`{"error":{"message":"m","code":504}}`)), "error code 504 in a 502 answer")
	assert.Error(t, checkErrorBody(502, []byte(`<html>bad gateway</html>`)))
	assert.Error(t, checkErrorBody(502, []byte(`{"error":{"code":502}}`)), "no message")
}

func TestCheckCompletion(t *testing.T) {
	t.Parallel()
	ok := fmt.Appendf(nil, `{"choices":[{"index":0}],"usage":{"completion_tokens":%d}}`, maxTokens)
	assert.NoError(t, checkCompletion(ok))
	assert.Error(t, checkCompletion([]byte(`{"choices":[{"index":0}],"usage":{"completion_tokens":3}}`)), "short")
	assert.Error(t, checkCompletion([]byte(`{"choices":[],"usage":{"completion_tokens":16}}`)), "no choice")
	assert.Error(t, checkCompletion([]byte(`{"choices":[{}]}`)), "no usage")
	assert.Error(t, checkCompletion([]byte(`{"choices":`)), "cut")
}

func TestStreamAccount(t *testing.T) {
	t.Parallel()
	openai := func(data ...string) *coordinatorv1.GenerateStreamResponse {
		ev := &coordinatorv1.OpenAIEvents{}
		for _, d := range data {
			ev.Data = append(ev.Data, []byte(d))
		}
		return &coordinatorv1.GenerateStreamResponse{Chunk: &coordinatorv1.GenerateStreamResponse_Openai{Openai: ev}}
	}
	tokens := func(n int, finish coordinatorv1.FinishReason) *coordinatorv1.GenerateStreamResponse {
		ch := &coordinatorv1.TokensChoice{TokenIds: make([]uint32, n), FinishReason: finish}
		return &coordinatorv1.GenerateStreamResponse{Chunk: &coordinatorv1.GenerateStreamResponse_Tokens{
			Tokens: &coordinatorv1.TokensChunk{Choices: []*coordinatorv1.TokensChoice{ch}}}}
	}
	chunk := `{"choices":[{"index":0}]}`

	var a streamAccount
	for range streamChunks - 1 {
		a.add(openai(chunk))
	}
	a.add(openai(chunk, "[DONE]"))
	assert.NoError(t, a.check(false))

	var short streamAccount
	short.add(openai(chunk, "[DONE]"))
	assert.ErrorIs(t, short.check(false), errChunkCount)

	var after streamAccount
	after.add(openai("[DONE]", chunk))
	assert.ErrorContains(t, after.check(false), "after [DONE]")

	var tok streamAccount
	tok.add(tokens(maxTokens-1, coordinatorv1.FinishReason_FINISH_REASON_UNSPECIFIED))
	assert.Error(t, tok.check(true), "one token short, unfinished")
	tok.add(tokens(1, coordinatorv1.FinishReason_FINISH_REASON_LENGTH))
	assert.NoError(t, tok.check(true))
}

func TestBodiesAreJSONWithTheirNonce(t *testing.T) {
	t.Parallel()
	for _, k := range kinds {
		if k.body == nil {
			assert.True(t, k.tokens, k.name)
			continue
		}
		a, b := k.body(nil, 1), k.body(nil, 2)
		assert.True(t, json.Valid(a), "%s: %s", k.name, a)
		assert.NotEqual(t, a, b, "%s: each nonce its prompt", k.name)
		assert.Equal(t, k.stream, strings.Contains(string(a), `"stream":true`), k.name)
	}
	assert.NotEqual(t, tokensRequest(1).GetTokenIds(), tokensRequest(2).GetTokenIds())
	assert.NotEqual(t, tokensRequest(1).GetTokenIds(), tokensRequest(1+90000).GetTokenIds())
}
