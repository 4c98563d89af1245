package gateway_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/internal/gateway"
	"github.com/coordinator-project/coordinator/internal/headers"
)

func TestPost(t *testing.T) {
	t.Parallel()
	// seen passes each request the server saw to the test (a leg goes out
	// in one writev, which the race detector does not count as a sync).
	seen := make(chan *http.Request, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case seen <- r.Clone(context.Background()):
		default:
		}
		switch r.URL.Path {
		case "/bad":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnprocessableEntity)
			_, _ = w.Write([]byte(`{"error":"bad tokens"}`))
		case "/slow":
			time.Sleep(300 * time.Millisecond)
		default:
			w.WriteHeader(http.StatusCreated)
		}
	}))
	t.Cleanup(srv.Close)
	c, err := gateway.New(gateway.Options{Address: srv.URL + "/", MaxIdleConnsPerHost: 2, ResponseHeaderTimeout: 100 * time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	req := gateway.Request{Leg: "prefill", Path: "/v1/chat/completions", Profile: gateway.ProfilePrefill, RequestID: "rid",
		Header: headers.NewForwarded("x-custom", "v"), Body: []byte(`{}`)}

	resp, err := c.Post(context.Background(), req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusCreated, resp.StatusCode, "any 2xx is success")
	got := <-seen
	assert.Equal(t, "/v1/chat/completions", got.URL.Path, "a trailing slash on the address is dropped")
	assert.Equal(t, "prefill", got.Header.Get("EPP-Profile"))
	assert.Equal(t, "rid", got.Header.Get("X-Request-Id"))
	assert.Equal(t, "application/json", got.Header.Get("Content-Type"))
	assert.Equal(t, "v", got.Header.Get("X-Custom"))
	assert.Empty(t, got.Header.Get("Accept-Encoding"), "legs are not compressed")

	req.Path = "/bad"
	_, err = c.Post(context.Background(), req)
	var se *gateway.StatusError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, "application/json", se.Header.Get("Content-Type"), "the answer's header is kept")
	assert.Equal(t, "22", se.Header.Get("Content-Length"))
	se.Header = nil
	assert.Equal(t, gateway.StatusError{Leg: "prefill", StatusCode: 422, ContentType: "application/json", Body: []byte(`{"error":"bad tokens"}`)}, *se)

	req.Path = "/slow"
	_, err = c.Post(context.Background(), req)
	var te *gateway.TransportError
	require.ErrorAs(t, err, &te)
	assert.True(t, te.Timeout(), "waiting for headers past the timeout")

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = c.Post(ctx, req)
	assert.ErrorIs(t, err, context.Canceled)
	assert.False(t, errors.As(err, &te), "a cancelled request is not a transport failure")
}

// TestARedirectIsTheLegsAnswer: a leg answered with a redirect fails with
// that status, body and header, as any other non-2xx answer; the client
// does not send the leg on to the Location (http.Client would, and would
// turn a 302 or 303 into a GET without the body).
func TestARedirectIsTheLegsAnswer(t *testing.T) {
	t.Parallel()
	for _, code := range []int{http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		hits := 0
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			hits++
			if r.URL.Path == "/elsewhere" {
				w.WriteHeader(http.StatusOK)
				return
			}
			w.Header().Set("Location", "/elsewhere")
			w.WriteHeader(code)
			_, _ = w.Write([]byte("moved"))
		}))
		c, err := gateway.New(gateway.Options{Address: srv.URL})
		require.NoError(t, err)
		_, err = c.Post(context.Background(), gateway.Request{Leg: "decode", Path: "/v1/completions", Profile: gateway.ProfileDecode, Body: []byte(`{}`)})
		var se *gateway.StatusError
		require.ErrorAs(t, err, &se, "HTTP %d", code)
		assert.Equal(t, code, se.StatusCode)
		assert.Equal(t, "/elsewhere", se.Header.Get("Location"))
		assert.Equal(t, "moved", string(se.Body))
		assert.Equal(t, 1, hits, "HTTP %d: the leg went once, to its own path", code)
		c.Close()
		srv.Close()
	}
}

func TestPostUnreachable(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	addr := srv.URL
	srv.Close()
	c, err := gateway.New(gateway.Options{Address: addr})
	require.NoError(t, err)
	_, err = c.Post(context.Background(), gateway.Request{Leg: "decode", Path: "/x"})
	var te *gateway.TransportError
	require.ErrorAs(t, err, &te)
	assert.Equal(t, "decode", te.Leg)
	assert.False(t, te.Timeout())
}

func TestNewRejectsBadAddresses(t *testing.T) {
	t.Parallel()
	for _, a := range []string{"", "gateway:80", "ftp://x", "http://", "::"} {
		_, err := gateway.New(gateway.Options{Address: a})
		assert.Error(t, err, a)
	}
}
