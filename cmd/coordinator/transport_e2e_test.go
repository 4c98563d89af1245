package main

import (
	"context"
	"net/http"
	"testing"

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
