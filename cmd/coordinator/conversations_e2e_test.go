package main

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
	"github.com/coordinator-project/coordinator/steps/steptest"
)

// The OpenAI Conversations API end to end (service/responses
// conversation_api.go), on both backends: a conversation created with an
// item, three turns continuing it by "conversation" (REST whole, REST
// streamed, gRPC) whose decode legs are byte for byte those of the same
// conversation sent statelessly with its whole input; its items paged, one
// deleted, the conversation deleted and then a 404 on every route.

// itemPage is what a test reads of a list answer.
type itemPage struct {
	Object  string            `json:"object"`
	Data    []json.RawMessage `json:"data"`
	FirstID string            `json:"first_id"`
	LastID  string            `json:"last_id"`
	HasMore bool              `json:"has_more"`
}

func TestConversationsMatchStateless(t *testing.T) {
	t.Parallel()
	rd := steptest.StartRedis(t)
	for name, responses := range map[string]string{
		"memory": "\nresponses:\n  tenant_header: OpenAI-Project\n",
		"redis":  "\nresponses:\n  tenant_header: OpenAI-Project\n  store:\n    backend: redis\n    redis_url: " + rd.URL + "\n",
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			conversationRoundTrip(t, responses)
		})
	}
}

// conversationRoundTrip runs the case on a coordinator with the
// responses section given.
func conversationRoundTrip(t *testing.T, responses string) {
	stored := startPDSide(t, storeYAML(responses))
	stateless := startPDSide(t, storeYAML("\nresponses:\n  store:\n    backend: \"off\"\n"))
	system := `{"type":"message","role":"developer","content":"Answer in one word."}`

	code, raw := send(t, stored.st, http.MethodPost, "/v1/conversations", `{"metadata":{"topic":"primes"},"items":[`+system+`]}`, "a")
	require.Equal(t, http.StatusOK, code, raw)
	var conv struct {
		ID       string            `json:"id"`
		Object   string            `json:"object"`
		Metadata map[string]string `json:"metadata"`
	}
	require.NoError(t, json.Unmarshal([]byte(raw), &conv))
	require.Equal(t, "conversation", conv.Object)
	require.Equal(t, map[string]string{"topic": "primes"}, conv.Metadata)
	ref := `"conversation":"` + conv.ID + `"`

	code, raw = send(t, stored.st, http.MethodPost, "/v1/responses", turnHead+`"Turn one: name three prime numbers below twenty, please.",`+ref+`}`, "a")
	require.Equal(t, http.StatusOK, code, raw)
	var a1 storedAnswer
	require.NoError(t, json.Unmarshal([]byte(raw), &a1))
	code, raw = send(t, stored.st, http.MethodPost, "/v1/responses", turnHead+`[`+user2+`],"conversation":{"id":"`+conv.ID+`"},"stream":true,"store":false}`, "a")
	require.Equal(t, http.StatusOK, code, raw)
	a2 := completedOf(t, raw)
	turn3 := turnHead + `[` + user3 + `],` + ref + `}`
	out, err := coordinatorv1.NewCoordinatorServiceClient(stored.st.conn).Generate(grpcTenant(t, "a"), &coordinatorv1.GenerateRequest{
		Input: &coordinatorv1.GenerateRequest_Openai{Openai: &coordinatorv1.OpenAIRequest{Endpoint: coordinatorv1.Endpoint_ENDPOINT_RESPONSES, Json: []byte(turn3)}},
	})
	require.NoError(t, err)
	var a3 storedAnswer
	require.NoError(t, json.Unmarshal(out.GetOpenai().GetJson(), &a3))

	// The same conversation, stateless, each turn with its whole input.
	history1 := system + `,` + user1
	history2 := history1 + `,` + itemsJSON(a1.Output...) + `,` + user2
	history3 := history2 + `,` + itemsJSON(a2.Output...) + `,` + user3
	for _, body := range []string{
		turnHead + `[` + history1 + `],"store":false}`,
		turnHead + `[` + history2 + `],"stream":true,"store":false}`,
		turnHead + `[` + history3 + `],"store":false}`,
	} {
		code, raw := send(t, stateless.st, http.MethodPost, "/v1/responses", body, "")
		require.Equal(t, http.StatusOK, code, raw)
	}
	want := decodeBodies(stateless.sim)
	require.Len(t, want, 3)
	assert.Contains(t, want[2], "Answer in one word", "the third turn's leg has the whole conversation")
	assert.Equal(t, want, decodeBodies(stored.sim), "each turn's decode leg, byte for byte")

	conversationItems(t, stored.st, conv.ID, a1, a3)
	conversationGone(t, stored.st, conv.ID)
}

// conversationItems pages the conversation's items (the developer message,
// then user and answer of each of three turns: 7), deletes one, and checks
// another tenant sees none of them.
func conversationItems(t *testing.T, st *stack, id string, a1, a3 storedAnswer) {
	t.Helper()
	var all []json.RawMessage
	page := itemPage{HasMore: true}
	for path := "/v1/conversations/" + id + "/items?limit=3&order=asc&include[]=x"; page.HasMore; {
		code, raw := send(t, st, http.MethodGet, path, "", "a")
		require.Equal(t, http.StatusOK, code, raw)
		page = itemPage{}
		require.NoError(t, json.Unmarshal([]byte(raw), &page))
		require.Equal(t, "list", page.Object)
		all = append(all, page.Data...)
		path = "/v1/conversations/" + id + "/items?limit=3&order=asc&after=" + page.LastID
	}
	require.Len(t, all, 7, "developer, then user and answer of three turns")
	assert.JSONEq(t, string(a1.Output[0]), string(all[2]), "the first answer is the third item")
	assert.JSONEq(t, string(a3.Output[0]), string(all[6]), "the last answer is the last item")

	var first struct {
		ID string `json:"id"`
	}
	require.NoError(t, json.Unmarshal(all[1], &first))
	require.Regexp(t, `^msg_[0-9a-f]{32}$`, first.ID, "a sent item without an id gets one")
	code, raw := send(t, st, http.MethodGet, "/v1/conversations/"+id+"/items/"+first.ID, "", "a")
	require.Equal(t, http.StatusOK, code, raw)
	assert.JSONEq(t, string(all[1]), raw)
	codeB, rawB := send(t, st, http.MethodGet, "/v1/conversations/"+id+"/items/"+first.ID, "", "b")
	assert.Equal(t, http.StatusNotFound, codeB, rawB)
	code, raw = send(t, st, http.MethodDelete, "/v1/conversations/"+id+"/items/"+first.ID, "", "a")
	require.Equal(t, http.StatusOK, code, raw)
	assert.Contains(t, raw, `"object":"conversation"`, "an item's deletion answers the conversation")
	code, raw = send(t, st, http.MethodGet, "/v1/conversations/"+id+"/items?limit=100", "", "a")
	require.Equal(t, http.StatusOK, code, raw)
	page = itemPage{}
	require.NoError(t, json.Unmarshal([]byte(raw), &page))
	assert.Len(t, page.Data, 6)
	assert.NotContains(t, raw, first.ID)

	code, raw = send(t, st, http.MethodPost, "/v1/conversations/"+id+"/items?include[]=message.output_text.logprobs", `{"items":[{"role":"user","content":"added"}]}`, "a")
	require.Equal(t, http.StatusOK, code, raw)
	assert.Contains(t, raw, `"content":"added"`)
	code, raw = send(t, st, http.MethodPost, "/v1/conversations/"+id, `{"metadata":{"topic":"sums"}}`, "a")
	require.Equal(t, http.StatusOK, code, raw)
	assert.Contains(t, raw, `"metadata":{"topic":"sums"}`)
}

// conversationGone deletes the conversation: every route, and a turn
// continuing it, then answers 404, as another tenant's id did before.
func conversationGone(t *testing.T, st *stack, id string) {
	t.Helper()
	codeB, rawB := send(t, st, http.MethodGet, "/v1/conversations/"+id, "", "b")
	code, raw := send(t, st, http.MethodDelete, "/v1/conversations/"+id, "", "a")
	require.Equal(t, http.StatusOK, code, raw)
	assert.Equal(t, `{"id":"`+id+`","object":"conversation.deleted","deleted":true}`, raw)
	code, raw = send(t, st, http.MethodGet, "/v1/conversations/"+id, "", "a")
	assert.Equal(t, http.StatusNotFound, code)
	assert.Equal(t, codeB, code)
	assert.Equal(t, rawB, raw, "another tenant's id answered as a deleted one")
	assert.Contains(t, raw, "Conversation with id '"+id+"' not found.")
	for _, r := range [][2]string{
		{http.MethodGet, "/v1/conversations/" + id + "/items"},
		{http.MethodDelete, "/v1/conversations/" + id},
		{http.MethodPost, "/v1/conversations/" + id + "/items"},
	} {
		code, raw := send(t, st, r[0], r[1], `{"items":[{"role":"user","content":"x"}]}`, "a")
		assert.Equal(t, http.StatusNotFound, code, "%s %s: %s", r[0], r[1], raw)
	}
	code, raw = send(t, st, http.MethodPost, "/v1/responses", turnHead+`"x","conversation":"`+id+`"}`, "a")
	assert.Equal(t, http.StatusNotFound, code, raw)
}
