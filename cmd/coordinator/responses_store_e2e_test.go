package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/metadata"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
	"github.com/coordinator-project/coordinator/sim"
	"github.com/coordinator-project/coordinator/steps/steptest"
)

// Stored Responses end to end (service/responses): a conversation by
// previous_response_id through a P/D pipeline on every door, whose decode
// legs are byte for byte those of the same conversation sent statelessly
// with its whole input; retrieve, delete and input items; tenants; two
// coordinators sharing one Redis, and Redis going away and coming back.

// storeYAML is the P/D pipeline with the responses section given.
func storeYAML(responses string) string {
	return fmt.Sprintf(pdDisaggregated, true) + responses
}

// storedAnswer is what a test reads of a Responses answer.
type storedAnswer struct {
	ID     string            `json:"id"`
	Status string            `json:"status"`
	Output []json.RawMessage `json:"output"`
}

// decodeBodies are the bodies of s's decode legs, in order.
func decodeBodies(s *sim.Sim) []string {
	var bodies []string
	for _, l := range s.Legs() {
		if l.Service == sim.ServiceGateway && l.Profile == "decode" {
			bodies = append(bodies, string(l.Body))
		}
	}
	return bodies
}

// send posts body to /v1/responses as tenant ("" sends no tenant header)
// and returns the status and body.
func send(t *testing.T, st *stack, method, path, body, tenant string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, st.restURL+path, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Request-Id", "rid")
	if tenant != "" {
		req.Header.Set("OpenAI-Project", tenant)
	}
	resp, err := st.client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	return resp.StatusCode, readAll(t, resp.Body)
}

// completedOf is the response object of a stream's response.completed.
func completedOf(t *testing.T, raw string) storedAnswer {
	t.Helper()
	names, data := splitEvents(t, raw)
	for i, n := range names {
		if n == "response.completed" {
			var ev struct{ Response storedAnswer }
			require.NoError(t, json.Unmarshal([]byte(data[i]), &ev))
			return ev.Response
		}
	}
	t.Fatalf("no response.completed in %q", raw)
	return storedAnswer{}
}

func itemsJSON(items ...json.RawMessage) string {
	parts := make([]string, len(items))
	for i, it := range items {
		parts[i] = string(it)
	}
	return strings.Join(parts, ",")
}

const (
	turnHead = `{"model":"sim-model","max_output_tokens":4,"input":`
	user1    = `{"type":"message","role":"user","content":[{"type":"input_text","text":"Turn one: name three prime numbers below twenty, please."}]}`
	user2    = `{"role":"user","content":"Turn two: and their sum?"}`
	user3    = `{"role":"user","content":"Turn three: is that sum prime?"}`
)

// TestStoredConversationMatchesStateless: three turns by
// previous_response_id (REST whole, REST streamed, gRPC) give the decode
// worker exactly the bodies of the same conversation sent with its whole
// input and "store": false; the stored response, its input items and its
// deletion answer as OpenAI's; another tenant's id answers as a missing one.
func TestStoredConversationMatchesStateless(t *testing.T) {
	t.Parallel()
	tenant := "\nresponses:\n  tenant_header: OpenAI-Project\n"
	stored := startPDSide(t, storeYAML(tenant))
	stateless := startPDSide(t, storeYAML("\nresponses:\n  store:\n    backend: \"off\"\n"))

	code, raw := send(t, stored.st, http.MethodPost, "/v1/responses", turnHead+`"Turn one: name three prime numbers below twenty, please.","store":true}`, "a")
	require.Equal(t, http.StatusOK, code, raw)
	var a1 storedAnswer
	require.NoError(t, json.Unmarshal([]byte(raw), &a1))

	code, raw = send(t, stored.st, http.MethodPost, "/v1/responses", turnHead+`[`+user2+`],"previous_response_id":"`+a1.ID+`","stream":true}`, "a")
	require.Equal(t, http.StatusOK, code, raw)
	a2 := completedOf(t, raw)

	turn3 := turnHead + `[` + user3 + `],"previous_response_id":"` + a2.ID + `","store":true}`
	out, err := coordinatorv1.NewCoordinatorServiceClient(stored.st.conn).Generate(grpcTenant(t, "a"), &coordinatorv1.GenerateRequest{
		Input: &coordinatorv1.GenerateRequest_Openai{Openai: &coordinatorv1.OpenAIRequest{Endpoint: coordinatorv1.Endpoint_ENDPOINT_RESPONSES, Json: []byte(turn3)}},
	})
	require.NoError(t, err)
	var a3 storedAnswer
	require.NoError(t, json.Unmarshal(out.GetOpenai().GetJson(), &a3))

	// The same conversation, stateless, each turn with its whole input.
	history2 := user1 + `,` + itemsJSON(a1.Output...) + `,` + user2
	history3 := history2 + `,` + itemsJSON(a2.Output...) + `,` + user3
	for _, body := range []string{
		turnHead + `"Turn one: name three prime numbers below twenty, please.","store":false}`,
		turnHead + `[` + history2 + `],"stream":true}`,
		turnHead + `[` + history3 + `],"store":false}`,
	} {
		code, raw := send(t, stateless.st, http.MethodPost, "/v1/responses", body, "")
		require.Equal(t, http.StatusOK, code, raw)
	}
	want := decodeBodies(stateless.sim)
	require.Len(t, want, 3)
	assert.Contains(t, want[2], "Turn one", "the third turn's leg has the whole conversation")
	assert.Equal(t, want, decodeBodies(stored.sim), "each turn's decode leg, byte for byte")

	// Retrieve, input items, delete; tenant b sees none of it.
	code, raw = send(t, stored.st, http.MethodGet, "/v1/responses/"+a3.ID, "", "a")
	require.Equal(t, http.StatusOK, code, raw)
	assert.JSONEq(t, string(out.GetOpenai().GetJson()), raw)
	code, raw = send(t, stored.st, http.MethodGet, "/v1/responses/"+a3.ID+"/input_items?limit=2&order=asc&include[]=x", "", "a")
	require.Equal(t, http.StatusOK, code, raw)
	var page struct {
		Data    []json.RawMessage `json:"data"`
		FirstID string            `json:"first_id"`
		LastID  string            `json:"last_id"`
		HasMore bool              `json:"has_more"`
	}
	require.NoError(t, json.Unmarshal([]byte(raw), &page))
	require.Len(t, page.Data, 2)
	assert.True(t, page.HasMore)
	assert.JSONEq(t, string(a1.Output[0]), string(page.Data[1]), "the first answer's output is the second item")
	code, raw = send(t, stored.st, http.MethodGet, "/v1/responses/"+a3.ID+"/input_items?after="+page.LastID+"&order=asc", "", "a")
	require.Equal(t, http.StatusOK, code, raw)
	require.NoError(t, json.Unmarshal([]byte(raw), &page))
	assert.Len(t, page.Data, 3, "user2, the second answer, user3")
	assert.False(t, page.HasMore)

	codeB, rawB := send(t, stored.st, http.MethodGet, "/v1/responses/"+a1.ID, "", "b")
	code, raw = send(t, stored.st, http.MethodDelete, "/v1/responses/"+a1.ID, "", "a")
	require.Equal(t, http.StatusOK, code, raw)
	assert.Equal(t, `{"id":"`+a1.ID+`","object":"response","deleted":true}`, raw)
	code, raw = send(t, stored.st, http.MethodGet, "/v1/responses/"+a1.ID, "", "a")
	assert.Equal(t, http.StatusNotFound, code)
	assert.Equal(t, raw, rawB, "another tenant's id answers as a deleted one")
	assert.Equal(t, code, codeB)
	assert.Contains(t, raw, `Response with id '`+a1.ID+`' not found.`)

	code, raw = send(t, stored.st, http.MethodPost, "/v1/responses", turnHead+`"x","previous_response_id":"`+a2.ID+`"}`, "b")
	assert.Equal(t, http.StatusNotFound, code)
	assert.Contains(t, raw, `Previous response with id '`+a2.ID+`' not found.`)
}

// grpcTenant is a context carrying tenant as the OpenAI-Project metadata.
func grpcTenant(t *testing.T, tenant string) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return metadata.AppendToOutgoingContext(ctx, "openai-project", tenant)
}

// TestStoredResponsesInRedis: two coordinators sharing one Redis continue
// each other's conversations, a restarted one keeps them; with Redis gone a request that needs the
// store gets 503 before any leg while a stateless one is served; Redis
// back, the same coordinators store again without a restart.
func TestStoredResponsesInRedis(t *testing.T) {
	t.Parallel()
	rd := steptest.StartRedis(t)
	yaml := storeYAML("\nresponses:\n  store:\n    backend: redis\n    redis_url: " + rd.URL + "\n")
	s, gw, render := startSim(t, sim.Options{Strict: true, PromptTokensDetails: true, OutputTokens: 4})
	first, second := startStack(t, gw, render, yaml), startStack(t, gw, render, yaml)

	code, raw := send(t, first, http.MethodPost, "/v1/responses", turnHead+`"Turn one through the first coordinator."}`, "")
	require.Equal(t, http.StatusOK, code, raw)
	var a1 storedAnswer
	require.NoError(t, json.Unmarshal([]byte(raw), &a1))
	code, raw = send(t, second, http.MethodPost, "/v1/responses", turnHead+`[`+user2+`],"previous_response_id":"`+a1.ID+`"}`, "")
	require.Equal(t, http.StatusOK, code, raw)
	legs := decodeBodies(s)
	require.Len(t, legs, 2)
	assert.Contains(t, legs[1], "Turn one through the first coordinator.", "the second coordinator rebuilt the first's conversation")

	// A restart keeps the history: the first coordinator stops, a new one
	// on the same Redis retrieves turn 1 and continues from it.
	ctx, cancel := context.WithTimeout(context.Background(), first.app.StopTimeout())
	require.NoError(t, first.app.Stop(ctx))
	cancel()
	first = startStack(t, gw, render, yaml)
	code, raw = send(t, first, http.MethodGet, "/v1/responses/"+a1.ID, "", "")
	require.Equal(t, http.StatusOK, code, raw)
	assert.Contains(t, raw, `"id":"`+a1.ID+`"`)
	code, raw = send(t, first, http.MethodPost, "/v1/responses", turnHead+`[`+user2+`],"previous_response_id":"`+a1.ID+`"}`, "")
	require.Equal(t, http.StatusOK, code, raw)
	legs = decodeBodies(s)
	require.Len(t, legs, 3)
	assert.Equal(t, legs[1], legs[2], "the restarted coordinator rebuilt the same conversation, byte for byte")

	rd.Stop()
	before := len(decodeBodies(s))
	code, raw = send(t, second, http.MethodPost, "/v1/responses", turnHead+`"needs the store","store":true}`, "")
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Contains(t, raw, `\"store\": true needs the response store, which is unavailable`)
	code, raw = send(t, second, http.MethodPost, "/v1/responses", turnHead+`"x","previous_response_id":"`+a1.ID+`","store":false}`, "")
	assert.Equal(t, http.StatusServiceUnavailable, code, raw)
	assert.Equal(t, before, len(decodeBodies(s)), "no leg ran")
	code, raw = send(t, second, http.MethodPost, "/v1/responses", turnHead+`"stateless","store":false}`, "")
	assert.Equal(t, http.StatusOK, code, raw)

	rd.Start()
	code, raw = send(t, second, http.MethodPost, "/v1/responses", turnHead+`"stored again","store":true}`, "")
	require.Equal(t, http.StatusOK, code, raw)
	var again storedAnswer
	require.NoError(t, json.Unmarshal([]byte(raw), &again))
	code, raw = send(t, first, http.MethodGet, "/v1/responses/"+again.ID, "", "")
	assert.Equal(t, http.StatusOK, code, raw)
}

// TestStoredResponsesFlags: "store" is read as vLLM reads a flag ("ON",
// 1, "true" store; "no", 0 do not; absent stores by default), and a value
// vLLM would refuse is a 400.
func TestStoredResponsesFlags(t *testing.T) {
	t.Parallel()
	_, gw, render := startSim(t, sim.Options{Strict: true, OutputTokens: 2})
	st := startStack(t, gw, render, apisPipeline)
	for _, tc := range []struct {
		extra  string
		stored bool
	}{{`,"store":"ON"`, true}, {`,"store":1`, true}, {``, true}, {`,"store":null`, true}, {`,"store":"no"`, false}, {`,"store":0`, false}} {
		code, raw := send(t, st, http.MethodPost, "/v1/responses", turnHead+`"flag"`+tc.extra+`}`, "")
		require.Equal(t, http.StatusOK, code, raw)
		var a storedAnswer
		require.NoError(t, json.Unmarshal([]byte(raw), &a))
		code, raw = send(t, st, http.MethodGet, "/v1/responses/"+a.ID, "", "")
		if tc.stored {
			assert.Equal(t, http.StatusOK, code, "%s: %s", tc.extra, raw)
		} else {
			assert.Equal(t, http.StatusNotFound, code, "%s: %s", tc.extra, raw)
		}
	}
	code, raw := send(t, st, http.MethodPost, "/v1/responses", turnHead+`"flag","store":"perhaps"}`, "")
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Contains(t, raw, `\"store\" must be a boolean`)
}
