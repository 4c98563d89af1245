package sim

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLegsRecordsEveryLegInOrder(t *testing.T) {
	t.Parallel()
	e := strictEnv(t)
	render := `{"messages":[{"role":"user","content":"hi"}]}`
	require.Equal(t, 200, post(t, e.render.URL+pathChatRender, legHeader("", "flow-1"), render).status)
	require.Equal(t, 200, post(t, e.gateway.URL+pathChat, legHeader("prefill", "flow-1"), prefillChatBody).status)
	bad := legHeader("decode", "flow-1")
	require.Equal(t, 400, post(t, e.gateway.URL+pathChat, bad, decodeChatNoKV).status)
	require.Equal(t, 200, post(t, e.gateway.URL+pathChat, legHeader("", "flow-1"), decodeChatWithKV).status)
	require.Equal(t, 200, post(t, e.worker.URL+pathChat, legHeader("", "flow-1"), decodeChatNoKV).status)

	legs := e.sim.Legs()
	require.Len(t, legs, 4, "direct worker calls are not recorded")
	want := []struct {
		service, profile, path, body string
		status                       int
	}{
		{ServiceRender, "", pathChatRender, render, 200},
		{ServiceGateway, "prefill", pathChat, prefillChatBody, 200},
		{ServiceGateway, "decode", pathChat, decodeChatNoKV, 400},
		{ServiceGateway, "decode", pathChat, decodeChatWithKV, 200},
	}
	for i, w := range want {
		assert.Equal(t, w.service, legs[i].Service, i)
		assert.Equal(t, w.profile, legs[i].Profile, i)
		assert.Equal(t, w.path, legs[i].Path, i)
		assert.Equal(t, w.body, string(legs[i].Body), i)
		assert.Equal(t, w.status, legs[i].Status, i)
		assert.Equal(t, "flow-1", legs[i].Header.Get("X-Request-Id"), i)
	}
	assert.Empty(t, legs[3].Header.Get(ProfileHeader), "the header is recorded as received")
}

func TestLegsReturnsCopies(t *testing.T) {
	t.Parallel()
	e := strictEnv(t)
	require.Equal(t, 200, post(t, e.gateway.URL+pathChat, legHeader("decode", "copy-1"), decodeChatNoKV).status)
	legs := e.sim.Legs()
	require.Len(t, legs, 1)
	legs[0].Body[0] = 'X'
	legs[0].Header.Set("X-Request-Id", "changed")
	again := e.sim.Legs()
	assert.Equal(t, decodeChatNoKV, string(again[0].Body))
	assert.Equal(t, "copy-1", again[0].Header.Get("X-Request-Id"))
}

func TestLegsBounded(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		opts     Options
		bodies   []string
		wantKept []string
	}{
		{name: "count", opts: Options{MaxLegs: 2}, bodies: []string{`{"prompt":"1"}`, `{"prompt":"2"}`, `{"prompt":"3"}`},
			wantKept: []string{`{"prompt":"2"}`, `{"prompt":"3"}`}},
		{name: "bytes", opts: Options{MaxLegBytes: 30}, bodies: []string{`{"prompt":"1"}`, `{"prompt":"2"}`, `{"prompt":"3"}`},
			wantKept: []string{`{"prompt":"2"}`, `{"prompt":"3"}`}},
		{name: "newest kept even if too big", opts: Options{MaxLegBytes: 5}, bodies: []string{`{"prompt":"1"}`, `{"prompt":"2"}`},
			wantKept: []string{`{"prompt":"2"}`}},
		{name: "disabled", opts: Options{MaxLegs: -1}, bodies: []string{`{"prompt":"1"}`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newTestEnv(t, tc.opts)
			for _, b := range tc.bodies {
				require.Equal(t, 200, post(t, e.gateway.URL+pathCompletions, legHeader("", "b-1"), b).status)
			}
			var kept []string
			for _, l := range e.sim.Legs() {
				kept = append(kept, string(l.Body))
			}
			assert.Equal(t, tc.wantKept, kept)
		})
	}
}

func TestReset(t *testing.T) {
	t.Parallel()
	e := strictEnv(t)
	require.Equal(t, 200, post(t, e.gateway.URL+pathChat, legHeader("prefill", "reset-1"), prefillChatBody).status)
	require.Equal(t, 1, e.sim.prefilled.len())
	require.Equal(t, 1, e.sim.served.len())
	e.sim.Reset()
	assert.Empty(t, e.sim.Legs())
	assert.Zero(t, e.sim.prefilled.len())
	assert.Zero(t, e.sim.served.len())
	// After Reset the decode no longer needs kv params and the prompt is cold.
	require.Equal(t, 200, post(t, e.gateway.URL+pathChat, legHeader("decode", "reset-1"), decodeChatNoKV).status)
}

func TestLegStatusOfTooLargeBody(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, Options{Strict: true, MaxBodyBytes: 64})
	big := `{"prompt":"` + strings.Repeat("a", 64) + `"}`
	resp := post(t, e.gateway.URL+pathCompletions, legHeader("", "big-1"), big)
	require.Equal(t, http.StatusRequestEntityTooLarge, resp.status)
	legs := e.sim.Legs()
	require.Len(t, legs, 1)
	assert.Equal(t, http.StatusRequestEntityTooLarge, legs[0].Status)
	assert.Empty(t, legs[0].Body)
}
