package builtin_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/internal/wire/legs"
	"github.com/coordinator-project/coordinator/sim"
	"github.com/coordinator-project/coordinator/steps"
)

// simRender serves the simulator's render service and keeps a copy of its
// last answer.
type simRender struct {
	*httptest.Server
	mu     sync.Mutex
	answer []byte
}

func newSimRender(t *testing.T) *simRender {
	t.Helper()
	s := &simRender{}
	render := sim.New(sim.Options{}).Render()
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tee := &teeWriter{ResponseWriter: w}
		render.ServeHTTP(tee, r)
		s.mu.Lock()
		s.answer = tee.buf.Bytes()
		s.mu.Unlock()
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *simRender) lastAnswer() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.answer
}

// teeWriter copies the body it writes.
type teeWriter struct {
	http.ResponseWriter
	buf bytes.Buffer
}

func (w *teeWriter) Write(p []byte) (int, error) {
	w.buf.Write(p)
	return w.ResponseWriter.Write(p)
}

// renderedIDs is the part of a render answer the tests compare with.
type renderedIDs struct {
	TokenIDs []uint32 `json:"token_ids"`
}

func TestRenderAgainstTheSimulator(t *testing.T) {
	t.Parallel()
	t.Run("text chat", func(t *testing.T) {
		t.Parallel()
		srv := newSimRender(t)
		body := `{"model":"sim-model","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hello there, how are you?"}]}`
		rc := &steps.RequestContext{RequestID: "req-chat", Format: legs.FormatChat, Body: []byte(body)}
		require.NoError(t, newRender(t, srv.URL, nil).Execute(context.Background(), rc))

		var answer renderedIDs
		require.NoError(t, json.Unmarshal(srv.lastAnswer(), &answer))
		require.NotEmpty(t, answer.TokenIDs)
		assert.Equal(t, answer.TokenIDs, rc.Tokens.IDs())
		assert.Empty(t, rc.Multimodal)
		assert.Equal(t, body, string(editedBody(rc)))
	})
	t.Run("completions string prompt", func(t *testing.T) {
		t.Parallel()
		srv := newSimRender(t)
		body := `{"model":"sim-model","prompt":"The quick brown fox jumps over the lazy dog.","max_tokens":8}`
		rc := &steps.RequestContext{RequestID: "req-cmpl", Format: legs.FormatCompletions, Body: []byte(body)}
		require.NoError(t, newRender(t, srv.URL, nil).Execute(context.Background(), rc))

		var answer []renderedIDs
		require.NoError(t, json.Unmarshal(srv.lastAnswer(), &answer))
		require.Len(t, answer, 1)
		require.NotEmpty(t, answer[0].TokenIDs)
		assert.Equal(t, answer[0].TokenIDs, rc.Tokens.IDs())
		var edited struct {
			Prompt    []uint32 `json:"prompt"`
			MaxTokens int      `json:"max_tokens"`
		}
		require.NoError(t, json.Unmarshal(editedBody(rc), &edited))
		assert.Equal(t, answer[0].TokenIDs, edited.Prompt)
		assert.Equal(t, 8, edited.MaxTokens)
	})
	t.Run("image chat seeds the entries (D7)", func(t *testing.T) {
		t.Parallel()
		srv := newSimRender(t)
		const url = "data:image/png;base64,iVBORw0KGgo="
		body := `{"model":"sim-model","messages":[{"role":"user","content":[{"type":"text","text":"Describe"},` +
			`{"type":"image_url","image_url":{"url":"` + url + `"}}]}]}`
		rc := &steps.RequestContext{RequestID: "req-img", Format: legs.FormatChat, Body: []byte(body)}
		require.NoError(t, newRender(t, srv.URL, nil).Execute(context.Background(), rc))

		var answer renderedIDs
		require.NoError(t, json.Unmarshal(srv.lastAnswer(), &answer))
		assert.Equal(t, answer.TokenIDs, rc.Tokens.IDs())
		require.Len(t, rc.Multimodal, 1)
		e := rc.Multimodal[0]
		assert.Equal(t, 0, e.Index)
		assert.Equal(t, sim.ImageHash(url), e.Hash)
		assert.JSONEq(t, `"`+sim.ImageKwargs(e.Hash)+`"`, string(e.KwargsData))
		assert.Positive(t, e.Placeholder.Length)
		assert.LessOrEqual(t, e.Placeholder.Offset+e.Placeholder.Length, len(rc.Tokens.IDs()))
	})
}
