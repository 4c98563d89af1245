package main

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
	"github.com/coordinator-project/coordinator/internal/headers"
	"github.com/coordinator-project/coordinator/sim"
)

// Compat D25: a client's x-request-id is its own, and clients reuse them.
// Every leg of one request, and its KV hand-off, carry an id unique to the
// request, so two requests in flight with one id never share a hand-off.

const legIDsChat = `{"model":"sim-model","max_tokens":3,"messages":[{"role":"user","content":"Who holds my KV blocks?"}]}`

// requestLegs is the gateway and render legs of the requests with client id id
// (headers.IsLegRequestID), grouped by the id they carried.
func requestLegs(s *sim.Sim, id string) map[string][]sim.Leg {
	out := map[string][]sim.Leg{}
	for _, l := range s.Legs() {
		if legID := l.Header.Get("X-Request-Id"); headers.IsLegRequestID(legID, id) {
			out[legID] = append(out[legID], l)
		}
	}
	return out
}

// remoteRequestID is the NIXL remote_request_id a decode leg carries.
func remoteRequestID(t *testing.T, decode sim.Leg) string {
	t.Helper()
	var body struct {
		KV struct {
			RemoteRequestID string `json:"remote_request_id"`
		} `json:"kv_transfer_params"`
	}
	require.NoError(t, json.Unmarshal(decode.Body, &body), string(decode.Body))
	return body.KV.RemoteRequestID
}

// sendTwice sends legIDsChat twice at once with client id id, over api,
// and returns the request id each answer carries.
func sendTwice(t *testing.T, st *stack, api, id string) [2]string {
	t.Helper()
	var got [2]string
	var wg sync.WaitGroup
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i] = sendChat(t, st, api, id)
		}()
	}
	wg.Wait()
	return got
}

// sendChat sends legIDsChat with client id id over api and returns the
// request id its answer carries ("" if it failed).
func sendChat(t *testing.T, st *stack, api, id string) string {
	if api == "rest" {
		resp := st.post(t, "/v1/chat/completions", legIDsChat, http.Header{"X-Request-Id": {id}})
		if body := readAll(t, resp.Body); !assert.Equal(t, http.StatusOK, resp.StatusCode, body) {
			return ""
		}
		return resp.Header.Get("X-Request-Id")
	}
	var header metadata.MD
	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-request-id", id)
	out, err := coordinatorv1.NewCoordinatorServiceClient(st.conn).Generate(ctx, &coordinatorv1.GenerateRequest{
		Input: &coordinatorv1.GenerateRequest_Openai{Openai: &coordinatorv1.OpenAIRequest{
			Endpoint: coordinatorv1.Endpoint_ENDPOINT_CHAT_COMPLETIONS, Json: []byte(legIDsChat),
		}},
	}, grpc.Header(&header))
	if !assert.NoError(t, err) {
		return ""
	}
	assert.Equal(t, []string{out.GetRequestId()}, header.Get("x-request-id"), "the header names the request as the response does")
	return out.GetRequestId()
}

func TestConcurrentRequestsWithOneIDNeverShareAHandOff(t *testing.T) {
	t.Parallel()
	s, gw, render := startSim(t, sim.Options{Strict: true})
	st := startStack(t, gw, render, apisPipeline)
	for _, api := range []string{"rest", "grpc"} {
		t.Run(api, func(t *testing.T) {
			t.Parallel()
			id := "same-id-" + api
			answered := sendTwice(t, st, api, id)
			assert.Equal(t, [2]string{id, id}, answered, "the answer carries the client's id")

			byLeg := requestLegs(s, id)
			require.Len(t, byLeg, 2, "one leg id per request")
			var handOffs []string
			for legID, legs := range byLeg {
				assert.NotEqual(t, id, legID, "a client's id is never a leg id as is")
				assert.Regexp(t, `^same-id-`+api+`-[0-9a-f]{16}$`, legID)
				profiles := map[string]int{}
				for _, l := range legs {
					profiles[l.Service+"/"+l.Profile]++
				}
				assert.Equal(t, map[string]int{sim.ServiceRender + "/": 1, sim.ServiceGateway + "/prefill": 1, sim.ServiceGateway + "/decode": 1},
					profiles, "render, prefill and decode of one request carry one id")
				for _, l := range legs {
					if l.Profile == "decode" {
						handOffs = append(handOffs, remoteRequestID(t, l))
						assert.Equal(t, legID, handOffs[len(handOffs)-1], "the KV hand-off is named by the request's leg id")
					}
				}
			}
			require.Len(t, handOffs, 2)
			assert.NotEqual(t, handOffs[0], handOffs[1], "two requests, two KV hand-offs")
		})
	}
}

func TestClientRequestIDOnLegsRestoresTheClientsID(t *testing.T) {
	t.Parallel()
	s, gw, render := startSim(t, sim.Options{Strict: true})
	st := startStackEnv(t, map[string]string{"COORDINATOR_SERVER_CLIENT_REQUEST_ID_ON_LEGS": "true"}, gw, render, apisPipeline)
	for _, api := range []string{"rest", "grpc"} {
		id := "verbatim-" + api
		assert.Equal(t, id, sendChat(t, st, api, id))
		byLeg := requestLegs(s, id)
		assert.Len(t, byLeg[id], 3, "render, prefill and decode carry the client's id as sent: %v", byLeg)
		assert.Len(t, byLeg, 1)
	}
}

func TestMintedIDsGoOnTheLegsAsTheyAre(t *testing.T) {
	t.Parallel()
	s, gw, render := startSim(t, sim.Options{Strict: true})
	st := startStack(t, gw, render, apisPipeline)
	for _, api := range []string{"rest", "grpc"} {
		id := sendChat(t, st, api, "not a valid id!")
		require.Len(t, id, 36, "a fresh UUID")
		byLeg := requestLegs(s, id)
		assert.Len(t, byLeg[id], 3, "unique already: render, prefill and decode carry it as it is")
	}
}
