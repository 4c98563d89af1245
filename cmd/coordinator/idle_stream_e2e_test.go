package main

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/steps/steptest"
)

// TestAnOpenStreamHoldsNoLegGoroutine opens a streamed chat whose worker
// sent one event and waits: the decode leg holds no goroutine of its own
// (internal/gateway, h1_*.go), where net/http's transport held its read and write loops.
// The client is a raw connection, so any net/http transport goroutine in
// the process would be the leg's.
func TestAnOpenStreamHoldsNoLegGoroutine(t *testing.T) {
	release := make(chan struct{})
	gw := steptest.NewGateway(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}]}\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
		_, _ = io.WriteString(w, "data: [DONE]\n\n")
	})
	st := startStack(t, gw.URL, "", decodeOnly)
	before := goroutinesIn("net/http.(*persistConn)") // an earlier test's kept connections, if any

	conn, err := net.Dial("tcp", strings.TrimPrefix(st.restURL, "http://"))
	require.NoError(t, err)
	defer conn.Close()
	body := `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`
	_, err = io.WriteString(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: coordinator\r\nContent-Type: application/json\r\n"+
		"Content-Length: "+strconv.Itoa(len(body))+"\r\n\r\n"+body)
	require.NoError(t, err)
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	event, err := bufio.NewReader(resp.Body).ReadString('\n')
	require.NoError(t, err)
	require.Contains(t, event, `"content":"a"`, "the first event arrived: the stream is open and waiting")

	assert.LessOrEqual(t, goroutinesIn("net/http.(*persistConn)"), before, "no transport read or write loop while the leg is open")
	close(release)
}

// goroutinesIn counts the goroutines with a frame of fn on their stack.
func goroutinesIn(fn string) int {
	buf := make([]byte, 4<<20)
	n := 0
	for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
		if strings.Contains(g, fn) {
			n++
		}
	}
	return n
}
