package sim

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type streamChunk struct {
	ID        string `json:"id"`
	RequestID string `json:"request_id"`
	Object    string `json:"object"`
	Created   int64  `json:"created"`
	Model     string `json:"model"`
	Choices   []struct {
		Index int `json:"index"`
		Delta *struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"delta"`
		Text         string        `json:"text"`
		TokenIDs     []uint32      `json:"token_ids"`
		Logprobs     *chatLogprobs `json:"logprobs"`
		FinishReason *string       `json:"finish_reason"`
	} `json:"choices"`
	Usage *usage `json:"usage"`
}

// streamResult is a parsed SSE answer: per choice text, token IDs and
// finish reason, plus the usage event.
type streamResult struct {
	text     map[int]string
	tokenIDs map[int][]uint32
	finish   map[int]string
	roles    map[int]string
	usage    *usage
	chunks   []streamChunk
}

func parseStream(t *testing.T, body []byte) streamResult {
	t.Helper()
	data := sseData(t, body)
	require.NotEmpty(t, data)
	require.Equal(t, "[DONE]", data[len(data)-1], "stream ends with [DONE]")
	r := streamResult{text: map[int]string{}, tokenIDs: map[int][]uint32{}, finish: map[int]string{}, roles: map[int]string{}}
	for _, d := range data[:len(data)-1] {
		c := jsonOf[streamChunk](t, []byte(d))
		r.chunks = append(r.chunks, c)
		if c.Usage != nil {
			require.Empty(t, c.Choices, "the usage event has no choices")
			r.usage = c.Usage
			continue
		}
		require.Len(t, c.Choices, 1)
		ch := c.Choices[0]
		require.Empty(t, r.finish[ch.Index], "no event after a choice finished")
		r.text[ch.Index] += ch.Text
		if ch.Delta != nil {
			r.text[ch.Index] += ch.Delta.Content
			if ch.Delta.Role != "" {
				r.roles[ch.Index] = ch.Delta.Role
			}
		}
		r.tokenIDs[ch.Index] = append(r.tokenIDs[ch.Index], ch.TokenIDs...)
		if ch.FinishReason != nil {
			r.finish[ch.Index] = *ch.FinishReason
		}
	}
	return r
}

func TestWorkerStreaming(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, Options{OutputTokens: 3, Now: fixedClock})
	prompt := []uint32{4, 5, 6}
	tests := []struct {
		name, path, body, wantObject, wantFinish string
		wantN, wantTokens, wantPrompt            int
		wantUsage                                bool
	}{
		{
			name: "chat", path: pathChat,
			body:       `{"model":"sim-model","messages":[],"tokens":{"token_ids":[4,5,6]},"stream":true,"max_tokens":4}`,
			wantObject: "chat.completion.chunk", wantFinish: "length", wantN: 1, wantTokens: 4, wantPrompt: 3,
		},
		{
			name: "chat with usage and two choices", path: pathChat,
			body:       `{"messages":[],"tokens":{"token_ids":[4,5,6]},"stream":true,"n":2,"stream_options":{"include_usage":true}}`,
			wantObject: "chat.completion.chunk", wantFinish: "stop", wantN: 2, wantTokens: 3, wantPrompt: 3, wantUsage: true,
		},
		{
			name: "completions", path: pathCompletions,
			body:       `{"prompt":[4,5,6],"stream":true,"max_tokens":14,"stream_options":{"include_usage":true}}`,
			wantObject: "text_completion", wantFinish: "length", wantN: 1, wantTokens: 14, wantPrompt: 3, wantUsage: true,
		},
		{
			name: "generate", path: pathGenerate,
			body:       `{"token_ids":[4,5,6],"sampling_params":{"max_tokens":5},"stream":true}`,
			wantFinish: "length", wantN: 1, wantTokens: 5, wantPrompt: 3,
		},
		{
			name: "generate with usage and two choices", path: pathGenerate,
			body:       `{"token_ids":[4,5,6],"sampling_params":{"n":2},"stream":true,"stream_options":{"include_usage":true}}`,
			wantFinish: "stop", wantN: 2, wantTokens: 3, wantPrompt: 3, wantUsage: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			resp := post(t, e.worker.URL+tc.path, legHeader("", "s-1"), tc.body)
			require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
			assert.Equal(t, "text/event-stream", resp.header.Get("Content-Type"))
			got := parseStream(t, resp.body)
			for _, c := range got.chunks {
				if tc.path == pathGenerate {
					assert.Equal(t, "s-1", c.RequestID)
					continue
				}
				assert.Equal(t, tc.wantObject, c.Object)
				assert.Equal(t, fixedNow.Unix(), c.Created)
				assert.Equal(t, "sim-model", c.Model)
				assert.True(t, strings.HasSuffix(c.ID, "-s-1"), c.ID)
			}
			for c := range tc.wantN {
				assert.Equal(t, tc.wantFinish, got.finish[c], "choice %d", c)
				if tc.path == pathGenerate {
					assert.Equal(t, CompletionTokens(prompt, tc.wantTokens, c), got.tokenIDs[c])
					continue
				}
				var want strings.Builder
				for i := range tc.wantTokens {
					want.WriteString(wordAt(i).text)
				}
				assert.Equal(t, want.String(), got.text[c])
				if tc.path == pathChat {
					assert.Equal(t, "assistant", got.roles[c])
				}
			}
			assert.Len(t, got.finish, tc.wantN)
			if tc.wantUsage {
				require.NotNil(t, got.usage)
				assert.Equal(t, usage{PromptTokens: tc.wantPrompt, CompletionTokens: tc.wantTokens * tc.wantN, TotalTokens: tc.wantPrompt + tc.wantTokens*tc.wantN}, *got.usage)
			} else {
				assert.Nil(t, got.usage)
			}
		})
	}
}

func TestWorkerStreamingGenerateLogprobs(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, Options{})
	prompt := []uint32{1, 2}
	resp := post(t, e.worker.URL+pathGenerate, legHeader("", "s-2"),
		`{"token_ids":[1,2],"sampling_params":{"max_tokens":3,"logprobs":0},"stream":true}`)
	require.Equal(t, http.StatusOK, resp.status)
	got := parseStream(t, resp.body)
	require.Len(t, got.chunks, 3)
	for i, c := range got.chunks {
		ch := c.Choices[0]
		require.NotNil(t, ch.Logprobs)
		require.Len(t, ch.Logprobs.Content, 1)
		assert.Equal(t, TokenLogprob(prompt, 0, i), ch.Logprobs.Content[0].Logprob)
		assert.Empty(t, ch.Logprobs.Content[0].TopLogprobs, "logprobs 0 asks for no alternatives")
		assert.Equal(t, i == 2, ch.FinishReason != nil, "finish_reason only on the last token")
	}
}

// handlerDone wraps h and closes done when a request's handler returns;
// started is closed when it begins.
func handlerDone(h http.Handler) (http.Handler, <-chan struct{}, <-chan struct{}) {
	started, done := make(chan struct{}), make(chan struct{})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		defer close(done)
		h.ServeHTTP(w, r)
	}), started, done
}

// waitClosed fails the test if ch is not closed in a generous time; it guards
// against a handler that ignores its context rather than measuring speed.
func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: handler still running", what)
	}
}

func TestStreamStopsWhenClientGoes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		opts Options
	}{
		{name: "between tokens", opts: Options{TokenDelay: time.Hour}},
		{name: "before the first token", opts: Options{TTFT: time.Hour}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := New(tc.opts)
			h, _, done := handlerDone(s.Worker())
			srv := httptest.NewServer(h)
			defer srv.Close()

			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+pathChat,
				strings.NewReader(`{"messages":[],"stream":true}`))
			require.NoError(t, err)
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			require.Equal(t, http.StatusOK, resp.StatusCode, "headers are sent before the first token")
			if tc.opts.TTFT == 0 {
				line, err := bufio.NewReader(resp.Body).ReadString('\n')
				require.NoError(t, err)
				var c streamChunk
				require.NoError(t, json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &c))
				assert.Equal(t, "This", c.Choices[0].Delta.Content)
			}
			cancel()
			waitClosed(t, done, tc.name)
		})
	}
}

func TestNonStreamingStopsWhenClientGoes(t *testing.T) {
	t.Parallel()
	s := New(Options{TTFT: time.Hour})
	h, started, done := handlerDone(s.Worker())
	srv := httptest.NewServer(h)
	defer srv.Close()
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+pathChat, strings.NewReader(`{"messages":[]}`))
		if err == nil {
			var resp *http.Response
			if resp, err = http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		}
		errc <- err
	}()
	waitClosed(t, started, "start")
	cancel()
	waitClosed(t, done, "non-streaming")
	assert.ErrorIs(t, <-errc, context.Canceled)
}
