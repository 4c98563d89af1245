package main

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
	"github.com/coordinator-project/coordinator/sim"
)

// TestGatewayTransports: the app serves a P/D chat, REST and gRPC, on
// either client transport of gateway.transport, and a worker status
// outside 100-599 is a 502 on both.
func TestGatewayTransports(t *testing.T) {
	t.Parallel()
	const pd = `
pipeline:
  steps:
    - type: prefill
    - type: decode
`
	for _, transport := range []string{"h1", "net/http"} {
		t.Run(transport, func(t *testing.T) {
			t.Parallel()
			s, gw, _ := startSim(t, sim.Options{Strict: true})
			st := startStackEnv(t, map[string]string{"COORDINATOR_GATEWAY_TRANSPORT": transport}, gw, "", pd)

			resp := st.post(t, "/v1/chat/completions", `{"model":"sim-model","stream":true,"max_tokens":4,"messages":[{"role":"user","content":"Hi"}]}`, nil)
			require.Equal(t, http.StatusOK, resp.StatusCode)
			events := sseData(t, resp.Body)
			require.NotEmpty(t, events)
			assert.Equal(t, "[DONE]", events[len(events)-1])

			_, err := coordinatorv1.NewCoordinatorServiceClient(st.conn).Generate(context.Background(), chatRequest("transport-grpc", chatBody))
			require.NoError(t, err)
			var profiles []string
			for _, leg := range s.Legs() {
				profiles = append(profiles, leg.Profile)
			}
			assert.Equal(t, []string{"prefill", "decode", "prefill", "decode"}, profiles)

			resp = st.post(t, "/v1/chat/completions", chatBody, http.Header{sim.FaultHeader: {"decode=status:999"}, "X-Request-Id": {"transport-999"}})
			require.Equal(t, http.StatusBadGateway, resp.StatusCode)
			msg, _, _ := openAIError(t, readAll(t, resp.Body))
			assert.Equal(t, "decode answered no HTTP status (request_id: transport-999)", msg)
		})
	}
}

// TestAClientHeaderNoLegMayCarryIsRefusedAtTheDoor: a header name or value
// that h1 (and net/http's transport) would refuse to send on a leg never
// gets that far: the REST listener's server answers 400 before the
// coordinator sees the request, so no leg goes out. (gRPC's HTTP/2
// framer refuses such metadata alike.) h1's own check is the last line of
// defence, for headers the coordinator itself sets.
func TestAClientHeaderNoLegMayCarryIsRefusedAtTheDoor(t *testing.T) {
	t.Parallel()
	s, gw, _ := startSim(t, sim.Options{Strict: true})
	st := startStack(t, gw, "", decodeOnly)
	addr := strings.TrimPrefix(st.restURL, "http://")
	for _, header := range []string{"X-A: a\x00b", "X-A: a\x7fb", "X A: v", "X\x01A: v"} {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		require.NoError(t, c.SetDeadline(time.Now().Add(30*time.Second)))
		_, err = io.WriteString(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: coordinator\r\nContent-Type: application/json\r\n"+
			header+"\r\nContent-Length: "+strconv.Itoa(len(chatBody))+"\r\n\r\n"+chatBody)
		require.NoError(t, err)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		require.NoError(t, err, "%q", header)
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "%q", header)
		_ = c.Close()
	}
	assert.Empty(t, s.Legs(), "no leg went out")
}
