package sim

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// waitTimeout bounds every wait on an engine event.
const waitTimeout = 30 * time.Second

// engineEnv is a Sim whose engines listen on loopback, with its gateway.
type engineEnv struct {
	sim     *Sim
	gateway *httptest.Server
}

func newEngineEnv(t *testing.T, opts Options) *engineEnv {
	t.Helper()
	s := New(opts)
	require.NoError(t, s.ListenEngines(t.Context(), "127.0.0.1:0"))
	gw := httptest.NewServer(s.Gateway())
	t.Cleanup(func() {
		gw.Close()
		s.CloseEngines()
	})
	return &engineEnv{sim: s, gateway: gw}
}

func (env *engineEnv) engine(t *testing.T, id string) Engine {
	t.Helper()
	e, ok := env.sim.Engine(id)
	require.True(t, ok, id)
	require.NotEmpty(t, e.Addr)
	return e
}

func waitCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	t.Cleanup(cancel)
	return ctx
}

// stepGate stops every flight of an engine before its token `at` until
// released, reporting the request id of each flight that reaches it.
type stepGate struct {
	reached chan string
	release func()
}

func gateAt(t *testing.T, e Engine, at int) *stepGate {
	t.Helper()
	ch := make(chan struct{})
	var once sync.Once
	g := &stepGate{reached: make(chan string, 64), release: func() { once.Do(func() { close(ch) }) }}
	hook := func(f *flight, i int) {
		if i == at {
			g.reached <- f.ids[0]
			<-ch
		}
	}
	e.e.beforeStep.Store(&hook)
	t.Cleanup(g.release)
	return g
}

func (g *stepGate) wait(t *testing.T) string {
	t.Helper()
	select {
	case id := <-g.reached:
		return id
	case <-time.After(waitTimeout):
		require.FailNow(t, "no flight reached the gate")
		return ""
	}
}

// async sends a request in a goroutine; the answer comes on the channel.
func async(t *testing.T, url string, h http.Header, body string) <-chan response {
	t.Helper()
	out := make(chan response, 1)
	go func() {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(body))
		if err != nil {
			out <- response{status: -1, body: []byte(err.Error())}
			return
		}
		req.Header = h.Clone()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			out <- response{status: -1, body: []byte(err.Error())}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			out <- response{status: -2, header: resp.Header, body: append(b, []byte(" read error: "+err.Error())...)}
			return
		}
		out <- response{status: resp.StatusCode, header: resp.Header, body: b}
	}()
	return out
}

func receive(t *testing.T, ch <-chan response) response {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(waitTimeout):
		require.FailNow(t, "no answer")
		return response{}
	}
}

// control calls an engine's control route and returns the answer.
func control(t *testing.T, e Engine, method, path, body string) response {
	t.Helper()
	return doRequest(t, t.Context(), method, "http://"+e.Addr+path, http.Header{"Content-Type": {"application/json"}}, body)
}

func generateBody(requestID string, maxTokens int, stream bool) string {
	return fmt.Sprintf(`{"request_id":%q,"token_ids":[5,6,7],"sampling_params":{"max_tokens":%d},"stream":%t}`,
		requestID, maxTokens, stream)
}

// generateChunk is one event of a generate stream.
type generateChunk struct {
	RequestID string `json:"request_id"`
	Choices   []struct {
		Index          int          `json:"index"`
		FinishReason   *string      `json:"finish_reason"`
		TokenIDs       []uint32     `json:"token_ids"`
		WeightVersions []weightSpan `json:"weight_versions"`
	} `json:"choices"`
}

// generateStream is a parsed generate stream of one choice.
type generateStream struct {
	tokenIDs []uint32
	finish   string
	spans    []weightSpan
	events   int
}

func parseGenerateStream(t *testing.T, body []byte) generateStream {
	t.Helper()
	data := sseData(t, body)
	require.NotEmpty(t, data)
	require.Equal(t, "[DONE]", data[len(data)-1], "stream ends with [DONE]: %s", body)
	var s generateStream
	for i, d := range data[:len(data)-1] {
		c := jsonOf[generateChunk](t, []byte(d))
		require.Len(t, c.Choices, 1)
		ch := c.Choices[0]
		s.tokenIDs = append(s.tokenIDs, ch.TokenIDs...)
		s.events++
		last := i == len(data)-2
		if !last {
			assert.Nil(t, ch.FinishReason, "only the final chunk finishes")
			assert.Nil(t, ch.WeightVersions, "only the final chunk carries weight_versions")
			continue
		}
		require.NotNil(t, ch.FinishReason, "the final chunk finishes")
		s.finish, s.spans = *ch.FinishReason, ch.WeightVersions
	}
	return s
}

func TestEnginesDefaultOnePerRole(t *testing.T) {
	t.Parallel()
	env := newEngineEnv(t, Options{OutputTokens: 3})
	engines := env.sim.Engines()
	require.Len(t, engines, 3)
	for i, want := range []struct{ id, role string }{{"encode-0", "encode"}, {"prefill-0", "prefill"}, {"decode-0", "decode"}} {
		assert.Equal(t, want.id, engines[i].ID)
		assert.Equal(t, want.role, engines[i].Role)
		assert.True(t, strings.HasPrefix(engines[i].Addr, "127.0.0.1:"), engines[i].Addr)
		assert.Equal(t, DefaultWeightVersion, engines[i].WeightVersion())
	}
	assert.JSONEq(t, `{"id":"decode-0","role":"decode","address":"`+engines[2].Addr+`"}`, mustJSON(t, engines[2]))

	r := post(t, env.gateway.URL+pathGenerate, legHeader("decode", "r1"), generateBody("r1", 4, false))
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	assert.Equal(t, "decode-0", r.header.Get(EngineHeader))
	assert.Contains(t, string(r.body), `"token_ids":[`)
	assert.Contains(t, string(r.body), `"weight_versions":[{"version":"v1","start":0,"end":4}]`)

	// The engine's own address serves inference as a worker of its role.
	r = post(t, "http://"+engines[1].Addr+pathGenerate, legHeader("", "r2"), generateBody("r2", 2, false))
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	assert.Equal(t, "prefill-0", r.header.Get(EngineHeader))
	assert.Equal(t, "prefill", r.header.Get(PoolHeader))
}

func TestEngineRoutesWireShapes(t *testing.T) {
	t.Parallel()
	env := newEngineEnv(t, Options{WorldSize: 4, Engines: EngineCounts{Decode: 2}})
	e := env.engine(t, "decode-1")
	steps := []struct {
		name, method, path, body string
		status                   int
		want                     string // exact JSON, "" for an empty body
	}{
		{"is_paused", "GET", "/is_paused", "", 200, `{"is_paused":false}`},
		{"bad mode", "POST", "/pause?mode=later", "", 400, `{"error":"invalid pause mode \"later\": expected abort, wait or keep"}`},
		{"pause default", "POST", "/pause", "", 200, `{"status":"paused"}`},
		{"paused", "GET", "/is_paused", "", 200, `{"is_paused":true}`},
		{"checker paused", "POST", "/weight_checker", `{"action":"checksum"}`, 409, `{"detail":"weight_checker requires an awake, unpaused engine"}`},
		{"resume", "POST", "/resume", "", 200, `{"status":"resumed"}`},
		{"resumed", "GET", "/is_paused", "", 200, `{"is_paused":false}`},
		{"abort none", "POST", "/abort_requests", `{"request_ids":["x"]}`, 200, `{"status":"aborted","aborted":0}`},
		{"abort all", "POST", "/abort_requests", `{}`, 200, `{"status":"aborted","aborted":0}`},
		{"abort bad json", "POST", "/abort_requests", `{`, 400, `{"detail":"Invalid JSON format"}`},
		{"weight info", "GET", "/weight_info", "", 200, `{"weight_version":"v1"}`},
		{"update version", "POST", "/update_weight_version", `{"new_version":"v2"}`, 200, `{"success":true,"new_version":"v2"}`},
		{"version set", "GET", "/weight_info", "", 200, `{"weight_version":"v2"}`},
		{"update no version", "POST", "/update_weight_version", `{}`, 422, `{"detail":"new_version: Field required"}`},
		{"init no info", "POST", "/init_weight_transfer_engine", `{}`, 400, `{"detail":"Missing 'init_info' in request body"}`},
		{"init", "POST", "/init_weight_transfer_engine", `{"init_info":{"rank_offset":3}}`, 200, `{"message":"Weight transfer initialized"}`},
		{"start update", "POST", "/start_weight_update", "", 200, `{"message":"Weight update started"}`},
		{"update no info", "POST", "/update_weights", `{}`, 400, `{"detail":"Missing 'update_info' in request body"}`},
		{"update", "POST", "/update_weights", `{"update_info":{"names":["w"]}}`, 200, `{"message":"Weights updated"}`},
		{"finish", "POST", "/finish_weight_update", `{"weight_version":"v3"}`, 200, `{"message":"Weight update finished"}`},
		{"version finished", "GET", "/weight_info", "", 200, `{"weight_version":"v3"}`},
		{"checker action", "POST", "/weight_checker", `{"action":"nope"}`, 400, `{"detail":"action must be one of checksum|reset|compare, got \"nope\""}`},
		{"checker compare", "POST", "/weight_checker", `{"action":"compare","baseline":{"model.weight":"00"}}`, 200, `{"match":false,"mismatches":["model.weight"]}`},
		{"checker reset", "POST", "/weight_checker", `{"action":"reset"}`, 200, `{"status":"reset"}`},
		{"world size", "GET", "/get_world_size", "", 200, `{"world_size":4}`},
		{"world size no dp", "GET", "/get_world_size?include_dp=false", "", 200, `{"world_size":4}`},
		{"is_sleeping", "GET", "/is_sleeping", "", 200, `{"is_sleeping":false}`},
		{"sleep bad level", "POST", "/sleep?level=x", "", 422, `{"detail":"level: Input should be a valid integer"}`},
		{"sleep", "POST", "/sleep?level=1", "", 200, ""},
		{"sleeping", "GET", "/is_sleeping", "", 200, `{"is_sleeping":true}`},
		{"wake up", "POST", "/wake_up", "", 200, ""},
		{"awake", "GET", "/is_sleeping", "", 200, `{"is_sleeping":false}`},
		{"wrong method", "GET", "/pause", "", 405, `{"detail":"Method Not Allowed"}`},
	}
	for _, st := range steps { // in order: each step sees the state the previous left
		r := control(t, e, st.method, st.path, st.body)
		require.Equal(t, st.status, r.status, "%s: %s", st.name, r.body)
		if st.want == "" {
			assert.Empty(t, r.body, st.name)
			continue
		}
		assert.JSONEq(t, st.want, string(r.body), st.name)
		assert.Equal(t, "application/json", r.header.Get("Content-Type"), st.name)
	}
	assert.JSONEq(t, `{"rank_offset":3}`, string(e.InitInfo()))
	assert.Nil(t, env.engine(t, "decode-0").InitInfo(), "init_info is per engine")
	assert.Equal(t, "v1", env.engine(t, "decode-0").WeightVersion(), "the version is per engine")
}

func TestEngineWeightCheckerChecksumFollowsUpdates(t *testing.T) {
	t.Parallel()
	env := newEngineEnv(t, Options{})
	e := env.engine(t, "decode-0")
	checksum := func() string {
		r := control(t, e, "POST", "/weight_checker", `{"action":"checksum"}`)
		require.Equal(t, http.StatusOK, r.status, "%s", r.body)
		return mustJSON(t, jsonOf[map[string]any](t, r.body)["checksums"])
	}
	base := checksum()
	require.Equal(t, http.StatusOK, control(t, e, "POST", "/weight_checker", `{"action":"reset"}`).status)
	assert.NotEqual(t, base, checksum(), "reset changes the weights")
	require.Equal(t, http.StatusOK, control(t, e, "POST", "/update_weights", `{"update_info":{"n":1}}`).status)
	after := checksum()
	r := control(t, e, "POST", "/weight_checker", `{"action":"compare","baseline":`+after+`}`)
	assert.JSONEq(t, `{"match":true,"mismatches":[]}`, string(r.body))
}
