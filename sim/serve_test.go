package sim

import (
	"context"
	"net"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func listen(t *testing.T) net.Listener {
	t.Helper()
	var lc net.ListenConfig
	l, err := lc.Listen(t.Context(), "tcp", "127.0.0.1:0")
	require.NoError(t, err)
	return l
}

func TestServe(t *testing.T) {
	t.Parallel()
	s := New(Options{Strict: true, OutputTokens: 2})
	gl, rl := listen(t), listen(t)
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() { errc <- s.Serve(ctx, gl, rl) }()

	resp := post(t, "http://"+gl.Addr().String()+pathChat, legHeader("decode", "serve-1"), `{"messages":[]}`)
	assert.Equal(t, http.StatusOK, resp.status, "gateway: %s", resp.body)
	resp = post(t, "http://"+rl.Addr().String()+pathCompletionsRender, legHeader("", "serve-1"), `{"prompt":"hi"}`)
	assert.Equal(t, http.StatusOK, resp.status, "render: %s", resp.body)

	cancel()
	require.NoError(t, <-errc)
	http.DefaultClient.CloseIdleConnections()
}

func TestListenAndServe(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	assert.NoError(t, New(Options{}).ListenAndServe(ctx, "127.0.0.1:0", "127.0.0.1:0"), "a cancelled context stops cleanly")

	busy := listen(t)
	defer busy.Close()
	err := New(Options{}).ListenAndServe(t.Context(), "127.0.0.1:0", busy.Addr().String())
	assert.ErrorContains(t, err, "sim: listen render")
	err = New(Options{}).ListenAndServe(t.Context(), busy.Addr().String(), "127.0.0.1:0")
	assert.ErrorContains(t, err, "sim: listen gateway")
}
