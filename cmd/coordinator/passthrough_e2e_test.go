package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/internal/headers"
	"github.com/coordinator-project/coordinator/sim"
)

func TestPassthroughThroughTheApp(t *testing.T) {
	t.Parallel()
	s, gw, _ := startSim(t, sim.Options{Strict: true})
	st := startStack(t, gw, "", decodeOnly)

	resp, body := st.do(t, http.MethodGet, "/v1/models?verbose=1", http.Header{
		"Authorization": {"Bearer tok"}, "Epp-Profile": {"prefill"}, "X-Request-Id": {"not valid!"},
	})
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	var models struct {
		Object string `json:"object"`
		Data   []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &models), body)
	assert.Equal(t, "list", models.Object)
	require.Len(t, models.Data, 1)
	assert.Equal(t, sim.DefaultModel, models.Data[0].ID, "the decode worker's own answer")
	id := resp.Header.Get("X-Request-Id")
	assert.True(t, headers.ValidRequestID(id), id)

	legs := s.Legs()
	require.Len(t, legs, 1)
	assert.Equal(t, "decode", legs[0].Profile, "EPP-Profile: decode, not the client's")
	assert.Equal(t, "/v1/models", legs[0].Path)
	assert.Equal(t, id, legs[0].Header.Get("X-Request-Id"))
	assert.Equal(t, "Bearer tok", legs[0].Header.Get("Authorization"))

	resp, body = st.do(t, http.MethodPost, "/v1/nope", nil)
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
	assert.Contains(t, body, `"Not Found"`, "the worker's 404 is relayed as it came")

	resp, body = st.do(t, http.MethodGet, "/v1/chat/completions", nil)
	assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode, body)
	assert.Equal(t, "POST", resp.Header.Get("Allow"))

	over := st.post(t, "/v1/embeddings", `{"input":"`+strings.Repeat("a", 1<<20)+`"}`, nil)
	assert.Equal(t, http.StatusRequestEntityTooLarge, over.StatusCode, "server.max_request_body_size applies")
	assert.Len(t, s.Legs(), 2, "neither the 405 nor the 413 reached the gateway")

	// A request is counted as its handler returns, after the client may
	// have read the whole answer.
	for _, status := range []string{"200", "404", "413"} {
		series := `coordinator_requests_total{api="rest",endpoint="passthrough",status="` + status + `"}`
		assert.Eventually(t, func() bool { return st.scrape(t, series) == "1" }, 5*time.Second, 10*time.Millisecond, series)
	}
}

func TestPassthroughStreamOutlivesTheWriteTimeout(t *testing.T) {
	t.Parallel()
	firstRead := make(chan struct{})
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: 1\n\n")
		w.(http.Flusher).Flush()
		select { // the second event comes after server.write_timeout has passed
		case <-firstRead:
		case <-r.Context().Done():
			return
		}
		select {
		case <-time.After(400 * time.Millisecond):
		case <-r.Context().Done():
			return
		}
		_, _ = io.WriteString(w, "data: 2\n\n")
	}))
	t.Cleanup(gw.Close)
	st := startStackEnv(t, map[string]string{"COORDINATOR_SERVER_WRITE_TIMEOUT": "200ms"}, gw.URL, "", decodeOnly)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, st.restURL+"/v1/embeddings", strings.NewReader(`{"stream":true}`))
	require.NoError(t, err)
	resp, err := st.client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	rd := bufio.NewReader(resp.Body)
	line, err := rd.ReadString('\n')
	require.NoError(t, err)
	assert.Equal(t, "data: 1\n", line, "the first event before the gateway sends the second")
	close(firstRead)
	rest, err := io.ReadAll(rd)
	require.NoError(t, err, "the stream is not cut by the write timeout")
	assert.Equal(t, "\ndata: 2\n\n", string(rest))
}
