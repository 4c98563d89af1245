package gateway_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/internal/gateway"
	"github.com/coordinator-project/coordinator/internal/headers"
)

// legLog is an Observer that keeps the legs it is told about.
type legLog struct {
	mu   sync.Mutex
	legs []gateway.LegResult
}

func (l *legLog) LegDone(r gateway.LegResult) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.legs = append(l.legs, r)
}

func TestForward(t *testing.T) {
	t.Parallel()
	got := make(chan *http.Request, 1)
	gotBody := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- r.Clone(context.Background())
		gotBody <- string(b)
		w.Header().Set("Connection", "X-Hop")
		w.Header().Set("X-Hop", "1")
		w.Header().Set("Keep-Alive", "timeout=5")
		w.Header().Set("X-Kept", "k")
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, `{"detail":"Not Found"}`)
	}))
	t.Cleanup(srv.Close)
	c, err := gateway.New(gateway.Options{Address: srv.URL + "/"})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	obs := &legLog{}
	ctx := gateway.WithObserver(context.Background(), obs)

	resp, err := c.Forward(ctx, gateway.ForwardRequest{
		Method: http.MethodPut, Target: "/v1/things/a%2Fb?q=1", RequestID: "rid-1",
		Header: passthroughHeader(http.Header{
			"Content-Type": {"text/plain"}, "Epp-Profile": {"prefill"}, "X-Request-Id": {"client"},
			"Connection": {"X-Secret, keep-alive"}, "X-Secret": {"s"}, "Authorization": {"Bearer t"},
		}),
		Body: strings.NewReader("raw body"), ContentLength: 8,
	})
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	assert.Equal(t, http.StatusNotFound, resp.StatusCode, "any status comes back as an answer")
	assert.JSONEq(t, `{"detail":"Not Found"}`, string(body))
	assert.Equal(t, "k", resp.Header.Get("X-Kept"))
	for _, hop := range []string{"Connection", "X-Hop", "Keep-Alive"} {
		assert.Empty(t, resp.Header.Values(hop), hop)
	}

	r := <-got
	assert.Equal(t, http.MethodPut, r.Method)
	assert.Equal(t, "/v1/things/a%2Fb", r.URL.EscapedPath(), "the escaped path as it came")
	assert.Equal(t, "q=1", r.URL.RawQuery)
	assert.Equal(t, "raw body", <-gotBody)
	assert.Equal(t, int64(8), r.ContentLength)
	assert.Equal(t, "text/plain", r.Header.Get("Content-Type"))
	assert.Equal(t, []string{"decode"}, r.Header.Values("Epp-Profile"))
	assert.Equal(t, []string{"rid-1"}, r.Header.Values("X-Request-Id"))
	assert.Equal(t, "Bearer t", r.Header.Get("Authorization"))
	assert.Empty(t, r.Header.Get("X-Secret"), "a header the client's Connection names is hop-by-hop")

	require.Len(t, obs.legs, 1)
	assert.Equal(t, "passthrough", obs.legs[0].Leg)
	assert.Equal(t, "decode", obs.legs[0].Phase)
	assert.Equal(t, http.StatusNotFound, obs.legs[0].StatusCode)
}

// passthroughHeader is what the passthrough sends of in with a body as sent.
func passthroughHeader(in http.Header) headers.Forwarded {
	f, _ := headers.Passthrough(in, headers.Trusted{}, true)
	return f
}

func TestForwardFailures(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	addr := srv.URL
	srv.Close()
	c, err := gateway.New(gateway.Options{Address: addr})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	obs := &legLog{}
	ctx := gateway.WithObserver(context.Background(), obs)

	_, err = c.Forward(ctx, gateway.ForwardRequest{Method: http.MethodGet, Target: "/v1/models"})
	var te *gateway.TransportError
	require.ErrorAs(t, err, &te)
	assert.Equal(t, "passthrough", te.Leg)
	require.Len(t, obs.legs, 1)
	assert.Zero(t, obs.legs[0].StatusCode)

	for _, bad := range []string{"v1/models", "@evil.example/x", ""} {
		_, err = c.Forward(ctx, gateway.ForwardRequest{Method: http.MethodGet, Target: bad})
		assert.ErrorContains(t, err, "is not a path", bad)
	}

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = c.Forward(cancelled, gateway.ForwardRequest{Method: http.MethodGet, Target: "/v1/models"})
	assert.ErrorIs(t, err, context.Canceled)
	assert.False(t, errors.As(err, &te), "a cancelled request is not a transport failure")
}

func TestForwardStreamIdleTimeout(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "data: 1\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	t.Cleanup(srv.Close)
	c, err := gateway.New(gateway.Options{Address: srv.URL, StreamIdleTimeout: 50 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	resp, err := c.Forward(context.Background(), gateway.ForwardRequest{Method: http.MethodGet, Target: "/v1/stream"})
	require.NoError(t, err)
	defer resp.Body.Close()
	_, err = io.ReadAll(resp.Body)
	var te *gateway.TransportError
	require.ErrorAs(t, err, &te, "a silent answer is cut")
	assert.True(t, te.Timeout())
	assert.ErrorIs(t, err, gateway.ErrStreamIdle)
}
