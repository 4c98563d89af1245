package gateway_test

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/internal/gateway"
)

const firstEvent = "data: {\"n\":0}\n\n"

// stallingServer sends the headers and head, then nothing until the client
// goes away, which it reports on gone.
func stallingServer(t *testing.T, contentType, head string, contentLength int) (*scripted, <-chan struct{}) {
	gone := make(chan struct{}, 1)
	srv := startScripted(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", contentType)
		if contentLength > 0 {
			w.Header().Set("Content-Length", strconv.Itoa(contentLength))
		}
		_, _ = io.WriteString(w, head)
		_ = http.NewResponseController(w).Flush()
		<-r.Context().Done()
		gone <- struct{}{}
	})
	return srv, gone
}

func within(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatalf("%s did not happen", what)
	}
}

// TestStreamIdleTimeoutCutsASilentBody: a body, streamed or not, that stops
// sending is cut after StreamIdleTimeout: the Read fails with a timeout
// *TransportError and the worker sees its request end.
func TestStreamIdleTimeoutCutsASilentBody(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, contentType, head string
		contentLength           int
	}{
		{name: "event stream", contentType: "text/event-stream", head: firstEvent},
		{name: "JSON with a length", contentType: "application/json", head: `{"choices":`, contentLength: 40},
		{name: "nothing after the headers", contentType: "application/json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv, gone := stallingServer(t, tt.contentType, tt.head, tt.contentLength)
			c, err := gateway.New(gateway.Options{Address: srv.URL, StreamIdleTimeout: 100 * time.Millisecond})
			require.NoError(t, err)
			t.Cleanup(c.Close)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second) // bounds a failing test
			defer cancel()
			resp, err := c.Post(ctx, gateway.Request{Leg: "decode", Path: "/v1/completions"})
			require.NoError(t, err)
			defer resp.Body.Close()
			start := time.Now()
			body, err := io.ReadAll(resp.Body)
			assert.Equal(t, tt.head, string(body), "what came before the silence is delivered")
			var te *gateway.TransportError
			require.ErrorAs(t, err, &te)
			assert.True(t, te.Timeout(), "a silent body is a timeout: %v", err)
			assert.True(t, te.InBody)
			assert.Equal(t, "decode", te.Leg)
			assert.ErrorIs(t, err, gateway.ErrStreamIdle)
			assert.GreaterOrEqual(t, time.Since(start), 100*time.Millisecond)
			within(t, gone, "the worker's request end")
		})
	}
}

// TestStreamIdleTimeoutSparesATrickle: a stream whose every gap is shorter
// than StreamIdleTimeout is never cut, though it lasts longer than it (and
// longer than the response-header timeout).
func TestStreamIdleTimeoutSparesATrickle(t *testing.T) {
	t.Parallel()
	// Gaps a twentieth of the bound: only a stall of most of a second on a
	// loaded machine would look like an idle stream.
	const events, gap, idle = 24, 50 * time.Millisecond, time.Second
	srv := startScripted(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		tick := time.NewTicker(gap)
		defer tick.Stop()
		for i := range events {
			_, _ = io.WriteString(w, "data: {\"n\":"+strconv.Itoa(i)+"}\n\n")
			_ = rc.Flush()
			select {
			case <-tick.C:
			case <-r.Context().Done():
				return
			}
		}
	})
	c, err := gateway.New(gateway.Options{Address: srv.URL, StreamIdleTimeout: idle, ResponseHeaderTimeout: 500 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	start := time.Now()
	resp, err := c.Post(context.Background(), gateway.Request{Leg: "decode", Path: "/v1/completions"})
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	assert.Equal(t, events, strings.Count(string(body), "data: "))
	assert.Greater(t, time.Since(start), idle, "the stream outlived the idle bound")
}

// TestStreamIdleTimeoutSparesASlowReader: time the caller spends between
// Reads is not the worker's silence.
func TestStreamIdleTimeoutSparesASlowReader(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	srv := startScripted(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, firstEvent)
		_ = http.NewResponseController(w).Flush()
		select {
		case <-release:
			_, _ = io.WriteString(w, "data: [DONE]\n\n")
		case <-r.Context().Done():
		}
	})
	c, err := gateway.New(gateway.Options{Address: srv.URL, StreamIdleTimeout: 50 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	resp, err := c.Post(context.Background(), gateway.Request{Leg: "decode", Path: "/v1/completions"})
	require.NoError(t, err)
	defer resp.Body.Close()
	buf := make([]byte, len(firstEvent))
	_, err = io.ReadFull(resp.Body, buf)
	require.NoError(t, err)
	time.Sleep(150 * time.Millisecond) // the caller is busy: no Read waits
	close(release)
	rest, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	assert.Equal(t, "data: [DONE]\n\n", string(rest))
}

// TestBodyErrors: a body cut mid-way is an InBody *TransportError that is
// not a timeout and not retried; the caller's own cancellation comes back
// as ctx's error.
func TestBodyErrors(t *testing.T) {
	t.Parallel()
	srv := startScripted(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "100")
		_, _ = io.WriteString(w, `{"half":`)
		_ = http.NewResponseController(w).Flush()
		if r.URL.Path == "/reset" {
			panic(http.ErrAbortHandler)
		}
		<-r.Context().Done()
	})
	c, clock := retryClient(t, srv.URL, gateway.Options{StreamIdleTimeout: time.Minute})

	t.Run("reset mid-body", func(t *testing.T) {
		leg := prefillLeg(true)
		leg.Path = "/reset"
		body, got, err := postLeg(c, context.Background(), leg)
		assert.Equal(t, `{"half":`, body)
		var te *gateway.TransportError
		require.ErrorAs(t, err, &te)
		assert.True(t, te.InBody)
		assert.False(t, te.Timeout())
		assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
		assert.Len(t, got, 1, "a 2xx answer is not sent again")
		assert.Empty(t, clock.waits())
	})
	t.Run("cancelled by the caller", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		resp, err := c.Post(ctx, prefillLeg(true))
		require.NoError(t, err)
		defer resp.Body.Close()
		buf := make([]byte, 8)
		_, err = io.ReadFull(resp.Body, buf)
		require.NoError(t, err)
		cancel()
		_, err = io.ReadAll(resp.Body)
		assert.ErrorIs(t, err, context.Canceled)
		var te *gateway.TransportError
		assert.NotErrorAs(t, err, &te, "the caller's cancellation is not the worker's fault")
	})
}

// silentListener accepts connections and never writes to them.
func silentListener(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Go(func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, conn)
			mu.Unlock()
		}
	})
	t.Cleanup(func() {
		_ = ln.Close()
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return ln.Addr().String()
}

// TestConnectTimeout: a TLS handshake that never completes fails the leg
// after ConnectTimeout, as a timeout, with and without Options.TLS.
func TestConnectTimeout(t *testing.T) {
	t.Parallel()
	addr := silentListener(t)
	for name, tlsConfig := range map[string]func() *tls.Config{
		"transport handshake": nil,
		"own TLS dialer":      func() *tls.Config { return &tls.Config{MinVersion: tls.VersionTLS12} },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c, err := gateway.New(gateway.Options{Address: "https://" + addr, ConnectTimeout: 100 * time.Millisecond, TLS: tlsConfig,
				Retry: policy})
			require.NoError(t, err)
			t.Cleanup(c.Close)
			start := time.Now()
			_, got, err := postLeg(c, context.Background(), prefillLeg(true))
			var te *gateway.TransportError
			require.ErrorAs(t, err, &te)
			assert.True(t, te.Timeout(), "%v", err)
			assert.Less(t, time.Since(start), 5*time.Second)
			assert.Len(t, got, 1, "a timeout is not retried")
		})
	}
}
