package builtin_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/internal/gateway"
	"github.com/coordinator-project/coordinator/internal/wire/legs"
	"github.com/coordinator-project/coordinator/steps"
)

// directRender is the token IDs the simulator's render service answers for
// a chat body.
func directRender(t *testing.T, url, chat string) []uint32 {
	t.Helper()
	resp, err := http.Post(url+"/v1/chat/completions/render", "application/json", strings.NewReader(chat))
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var answer renderedIDs
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&answer))
	require.NotEmpty(t, answer.TokenIDs)
	return answer.TokenIDs
}

// The count is the number of token IDs the render service answers for the
// chat the Messages or Responses body is to vLLM.
func TestRenderCountsTokens(t *testing.T) {
	t.Parallel()
	const chat = `{"model":"sim-model","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hello there, how are you?"}]}`
	for _, tc := range []struct {
		name   string
		format legs.Format
		body   string
	}{
		{"messages", legs.FormatMessages, `{"model":"sim-model","system":"Be brief.","messages":[{"role":"user","content":[{"type":"text","text":"Hello there, how are you?"}]}]}`},
		{"responses", legs.FormatResponses, `{"model":"sim-model","instructions":"Be brief.","input":[{"role":"user","content":[{"type":"input_text","text":"Hello there, how are you?"}]}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := newSimRender(t)
			counter := newRender(t, srv.URL, nil).(steps.TokenCounter)
			rc := &steps.RequestContext{RequestID: "req-count", Format: tc.format, Body: []byte(tc.body)}
			n, err := counter.CountTokens(context.Background(), rc)
			require.NoError(t, err)
			assert.Len(t, directRender(t, srv.URL, chat), n)
			assert.Empty(t, rc.Tokens.IDs(), "a count sets no tokens on the request")
		})
	}
}

// Render's failures are the render step's: a non-2xx answer is a
// *gateway.StatusError of leg render, a chat body is not counted, and
// max_total_tokens does not cap a count.
func TestRenderCountErrors(t *testing.T) {
	t.Parallel()
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "boom", http.StatusInternalServerError)
	}))
	t.Cleanup(failing.Close)
	body := []byte(`{"model":"sim-model","messages":[{"role":"user","content":"Hello there"}]}`)

	_, err := newRender(t, failing.URL, map[string]any{"retry": map[string]any{"max_attempts": 1}}).(steps.TokenCounter).
		CountTokens(context.Background(), &steps.RequestContext{RequestID: "r", Format: legs.FormatMessages, Body: body})
	var se *gateway.StatusError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, "render", se.Leg)
	assert.Equal(t, http.StatusInternalServerError, se.StatusCode)

	srv := newSimRender(t)
	counter := newRender(t, srv.URL, map[string]any{"max_total_tokens": 1}).(steps.TokenCounter)
	_, err = counter.CountTokens(context.Background(), &steps.RequestContext{RequestID: "r", Format: legs.FormatChat, Body: body})
	assert.True(t, errors.Is(err, legs.ErrInvalidRequest), "%v", err)
	n, err := counter.CountTokens(context.Background(), &steps.RequestContext{RequestID: "r", Format: legs.FormatMessages, Body: body})
	require.NoError(t, err)
	assert.Greater(t, n, 1)
}
