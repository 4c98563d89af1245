package sim

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestEnginePauseKeepFreezesAndResumesWithNewVersion(t *testing.T) {
	t.Parallel()
	env := newEngineEnv(t, Options{})
	e := env.engine(t, "decode-0")
	gate := gateAt(t, e, 3)
	answer := async(t, env.gateway.URL+pathGenerate, legHeader("decode", "k1"), generateBody("k1", 8, true))
	assert.Equal(t, "k1", gate.wait(t))

	require.Equal(t, http.StatusOK, control(t, e, "POST", "/pause?mode=keep", "").status)
	require.Equal(t, http.StatusOK, control(t, e, "POST", "/update_weight_version", `{"new_version":"v2"}`).status)
	gate.release()
	require.NoError(t, e.WaitFrozen(waitCtx(t), 1), "the stream freezes before token 3")

	// A request sent during the pause is held, not refused.
	held := async(t, env.gateway.URL+pathGenerate, legHeader("decode", "k2"), generateBody("k2", 2, false))
	require.NoError(t, e.WaitHeld(waitCtx(t), 1))
	require.NoError(t, e.WaitInFlight(waitCtx(t), 1), "the held request is not in flight")

	require.Equal(t, http.StatusOK, control(t, e, "POST", "/resume", "").status)
	r := receive(t, answer)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	s := parseGenerateStream(t, r.body)
	assert.Equal(t, CompletionTokens([]uint32{5, 6, 7}, 8, 0), s.tokenIDs, "no token lost or repeated")
	assert.Equal(t, "length", s.finish)
	assert.Equal(t, []weightSpan{{"v1", 0, 3}, {"v2", 3, 8}}, s.spans)

	r = receive(t, held)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	assert.Contains(t, string(r.body), `"weight_versions":[{"version":"v2","start":0,"end":2}]`)
}

func TestEnginePauseAbortEndsInFlightWithPartialTokens(t *testing.T) {
	t.Parallel()
	env := newEngineEnv(t, Options{})
	e := env.engine(t, "decode-0")
	gate := gateAt(t, e, 2)
	gen := async(t, env.gateway.URL+pathGenerate, legHeader("decode", "a1"), generateBody("a1", 8, true))
	chat := async(t, env.gateway.URL+pathChat, legHeader("decode", "a2"),
		`{"messages":[{"role":"user","content":"hi"}],"max_tokens":8,"stream":true,"stream_options":{"include_usage":true}}`)
	plain := async(t, env.gateway.URL+pathGenerate, legHeader("decode", "a3"), generateBody("a3", 8, false))
	for range 3 {
		gate.wait(t)
	}

	r := control(t, e, "POST", "/pause", "") // mode abort by default
	require.Equal(t, http.StatusOK, r.status)
	gate.release()

	r = receive(t, gen)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	s := parseGenerateStream(t, r.body)
	assert.Equal(t, CompletionTokens([]uint32{5, 6, 7}, 2, 0), s.tokenIDs, "the tokens generated so far")
	assert.Equal(t, "abort", s.finish)
	assert.Equal(t, []weightSpan{{"v1", 0, 2}}, s.spans)
	assert.Equal(t, 3, s.events, "two tokens, then the final chunk")

	r = receive(t, chat)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	cs := parseStream(t, r.body)
	assert.Equal(t, "abort", cs.finish[0])
	assert.Equal(t, "This answer", cs.text[0])
	require.NotNil(t, cs.usage)
	assert.Equal(t, 2, cs.usage.CompletionTokens)

	r = receive(t, plain)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	got := jsonOf[generateResponse](t, r.body)
	require.Len(t, got.Choices, 1)
	assert.Equal(t, "abort", *got.Choices[0].FinishReason)
	assert.Len(t, got.Choices[0].TokenIDs, 2)
	assert.Equal(t, 2, got.Usage.CompletionTokens)

	// Paused after an abort: new requests wait for the resume.
	held := async(t, env.gateway.URL+pathGenerate, legHeader("decode", "a4"), generateBody("a4", 1, false))
	require.NoError(t, e.WaitHeld(waitCtx(t), 1))
	require.Equal(t, http.StatusOK, control(t, e, "POST", "/resume", "").status)
	assert.Equal(t, http.StatusOK, receive(t, held).status)
}

func TestEnginePauseWaitLetsInFlightFinishAndHoldsNew(t *testing.T) {
	t.Parallel()
	env := newEngineEnv(t, Options{})
	e := env.engine(t, "decode-0")
	gate := gateAt(t, e, 1)
	inflight := async(t, env.gateway.URL+pathGenerate, legHeader("decode", "w1"), generateBody("w1", 4, true))
	gate.wait(t)

	paused := async(t, "http://"+e.Addr+"/pause?mode=wait", http.Header{}, "")
	require.NoError(t, e.e.await(waitCtx(t), func() bool { return e.e.paused }))
	held := async(t, env.gateway.URL+pathGenerate, legHeader("decode", "w2"), generateBody("w2", 1, false))
	require.NoError(t, e.WaitHeld(waitCtx(t), 1))
	gate.release()

	r := receive(t, inflight)
	require.Equal(t, http.StatusOK, r.status, "%s", r.body)
	s := parseGenerateStream(t, r.body)
	assert.Equal(t, "length", s.finish, "wait lets the request in flight finish")
	assert.Len(t, s.tokenIDs, 4)
	r = receive(t, paused)
	assert.JSONEq(t, `{"status":"paused"}`, string(r.body), "/pause answers once the engine drained")
	require.NoError(t, e.WaitHeld(waitCtx(t), 1), "the new request is still held")

	require.Equal(t, http.StatusOK, control(t, e, "POST", "/resume", "").status)
	assert.Equal(t, http.StatusOK, receive(t, held).status)
}

func TestEngineAbortRequestsByID(t *testing.T) {
	t.Parallel()
	env := newEngineEnv(t, Options{})
	e := env.engine(t, "decode-0")
	gate := gateAt(t, e, 1)
	// x-request-id names one, the generate body's request_id the other.
	one := async(t, env.gateway.URL+pathGenerate, legHeader("decode", "hdr-1"), generateBody("body-1", 3, true))
	two := async(t, env.gateway.URL+pathGenerate, legHeader("decode", "hdr-2"), generateBody("body-2", 3, true))
	three := async(t, env.gateway.URL+pathGenerate, legHeader("decode", "hdr-3"), generateBody("body-3", 3, true))
	for range 3 {
		gate.wait(t)
	}
	r := control(t, e, "POST", "/abort_requests", `{"request_ids":["hdr-1","body-2","nobody"]}`)
	assert.JSONEq(t, `{"status":"aborted","aborted":2}`, string(r.body))
	gate.release()

	assert.Equal(t, "abort", parseGenerateStream(t, receive(t, one).body).finish)
	assert.Equal(t, "abort", parseGenerateStream(t, receive(t, two).body).finish)
	s := parseGenerateStream(t, receive(t, three).body)
	assert.Equal(t, "length", s.finish, "a request not named runs on")
	assert.Len(t, s.tokenIDs, 3)
	require.NoError(t, e.WaitInFlight(waitCtx(t), 0))
	assert.JSONEq(t, `{"status":"aborted","aborted":0}`, string(control(t, e, "POST", "/abort_requests", `{"request_ids":[]}`).body))
}

func TestEngineAbortRequestsEmptyAbortsAll(t *testing.T) {
	t.Parallel()
	env := newEngineEnv(t, Options{})
	e := env.engine(t, "decode-0")
	gate := gateAt(t, e, 1)
	one := async(t, env.gateway.URL+pathGenerate, legHeader("decode", "e1"), generateBody("e1", 3, true))
	two := async(t, "http://"+e.Addr+pathGenerate, legHeader("", "e2"), generateBody("e2", 3, false))
	gate.wait(t)
	gate.wait(t)
	assert.JSONEq(t, `{"status":"aborted","aborted":2}`, string(control(t, e, "POST", "/abort_requests", "").body))
	gate.release()
	assert.Equal(t, "abort", parseGenerateStream(t, receive(t, one).body).finish)
	assert.Contains(t, string(receive(t, two).body), `"finish_reason":"abort"`)
	r := control(t, e, "GET", "/is_paused", "")
	assert.JSONEq(t, `{"is_paused":false}`, string(r.body), "abort_requests does not pause")
}

func TestEngineSleepRefusesGeneration(t *testing.T) {
	t.Parallel()
	env := newEngineEnv(t, Options{})
	e := env.engine(t, "decode-0")
	require.Equal(t, http.StatusOK, control(t, e, "POST", "/sleep", "").status)
	for _, url := range []string{env.gateway.URL, "http://" + e.Addr} {
		r := post(t, url+pathGenerate, legHeader("decode", "s1"), generateBody("s1", 1, false))
		assert.Equal(t, http.StatusServiceUnavailable, r.status, "%s", r.body)
		assert.Equal(t, "sim: engine is sleeping", errorOf(t, r.body).Message)
	}
	require.Equal(t, http.StatusOK, control(t, e, "POST", "/wake_up", "").status)
	r := post(t, env.gateway.URL+pathGenerate, legHeader("decode", "s2"), generateBody("s2", 1, false))
	assert.Equal(t, http.StatusOK, r.status, "%s", r.body)
}

func TestEngineSelection(t *testing.T) {
	t.Parallel()
	env := newEngineEnv(t, Options{Engines: EngineCounts{Prefill: 2, Decode: 3}})
	ids := make([]string, 0, 6)
	for i := range 6 {
		r := post(t, env.gateway.URL+pathGenerate, legHeader("decode", ""), generateBody("rr", 1, false))
		require.Equal(t, http.StatusOK, r.status, "request %d: %s", i, r.body)
		ids = append(ids, r.header.Get(EngineHeader))
	}
	assert.Equal(t, []string{"decode-0", "decode-1", "decode-2", "decode-0", "decode-1", "decode-2"}, ids, "round robin")

	h := legHeader("prefill", "")
	h.Set(EngineHeader, "prefill-1")
	for range 2 {
		r := post(t, env.gateway.URL+pathGenerate, h, generateBody("named", 1, false))
		require.Equal(t, http.StatusOK, r.status, "%s", r.body)
		assert.Equal(t, "prefill-1", r.header.Get(EngineHeader), "the header names the engine")
	}
	h.Set(EngineHeader, "decode-0") // not a prefill engine: round robin
	r := post(t, env.gateway.URL+pathGenerate, h, generateBody("other", 1, false))
	assert.Equal(t, "prefill-0", r.header.Get(EngineHeader))
}

func TestEngineStopped(t *testing.T) {
	t.Parallel()
	env := newEngineEnv(t, Options{Engines: EngineCounts{Decode: 2}})
	e0, e1 := env.engine(t, "decode-0"), env.engine(t, "decode-1")
	gate := gateAt(t, e0, 1)
	h := legHeader("decode", "cut")
	h.Set(EngineHeader, "decode-0")
	inflight := async(t, env.gateway.URL+pathGenerate, h, generateBody("cut", 4, true))
	gate.wait(t)
	e0.Stop()
	gate.release()

	r := receive(t, inflight)
	assert.Equal(t, -2, r.status, "a gateway leg in flight on a stopped engine is cut mid-answer: %s", r.body)

	_, err := http.Get("http://" + e0.Addr + "/is_paused")
	require.Error(t, err, "a stopped engine's address refuses connections")
	assert.JSONEq(t, `{"is_paused":false}`, string(control(t, e1, "GET", "/is_paused", "").body), "the other engine serves on")

	for range 2 {
		r := post(t, env.gateway.URL+pathGenerate, legHeader("decode", ""), generateBody("after", 1, false))
		require.Equal(t, http.StatusOK, r.status, "%s", r.body)
		assert.Equal(t, "decode-1", r.header.Get(EngineHeader), "the gateway skips a stopped engine")
	}
	r = post(t, env.gateway.URL+pathGenerate, h, generateBody("named", 1, false))
	assert.Equal(t, http.StatusBadGateway, r.status)
	assert.Equal(t, "sim: engine decode-0 is down", errorOf(t, r.body).Message)

	e1.Stop()
	r = post(t, env.gateway.URL+pathGenerate, legHeader("decode", ""), generateBody("none", 1, false))
	assert.Equal(t, http.StatusBadGateway, r.status)
	assert.Equal(t, "sim: no decode engine is up", errorOf(t, r.body).Message)
}

func TestEnginesPauseKeepManyStreamsAcrossEngines(t *testing.T) {
	t.Parallel()
	const streams, tokens, at = 64, 6, 2
	env := newEngineEnv(t, Options{Engines: EngineCounts{Decode: 2}})
	engines := []Engine{env.engine(t, "decode-0"), env.engine(t, "decode-1")}
	gates := []*stepGate{gateAt(t, engines[0], at), gateAt(t, engines[1], at)}
	answers := make([]<-chan response, streams)
	for i := range answers {
		id := fmt.Sprintf("m%d", i)
		answers[i] = async(t, env.gateway.URL+pathGenerate, legHeader("decode", id), generateBody(id, tokens, true))
	}
	for i := range streams {
		gates[i%2].wait(t) // round robin: half on each engine
	}
	for _, e := range engines {
		require.Equal(t, http.StatusOK, control(t, e, "POST", "/pause?mode=keep", "").status)
		require.Equal(t, http.StatusOK, control(t, e, "POST", "/update_weight_version", `{"new_version":"v2"}`).status)
	}
	for i, e := range engines {
		gates[i].release()
		require.NoError(t, e.WaitFrozen(waitCtx(t), streams/2))
	}
	for _, e := range engines {
		require.Equal(t, http.StatusOK, control(t, e, "POST", "/resume", "").status)
	}
	want := CompletionTokens([]uint32{5, 6, 7}, tokens, 0)
	for i, ch := range answers {
		r := receive(t, ch)
		require.Equal(t, http.StatusOK, r.status, "stream %d: %s", i, r.body)
		s := parseGenerateStream(t, r.body)
		assert.Equal(t, want, s.tokenIDs, "stream %d", i)
		assert.Equal(t, "length", s.finish, "stream %d", i)
		assert.Equal(t, []weightSpan{{"v1", 0, at}, {"v2", at, tokens}}, s.spans, "stream %d", i)
	}
}

func TestEngineSleepModes(t *testing.T) {
	t.Parallel()
	env := newEngineEnv(t, Options{})
	e := env.engine(t, "decode-0")
	assert.Equal(t, http.StatusBadRequest, control(t, e, "POST", "/sleep?mode=later", "").status)

	// abort (the default) ends the requests in flight.
	gate := gateAt(t, e, 1)
	aborted := async(t, env.gateway.URL+pathGenerate, legHeader("decode", "z1"), generateBody("z1", 3, true))
	gate.wait(t)
	require.Equal(t, http.StatusOK, control(t, e, "POST", "/sleep?level=2", "").status)
	gate.release()
	assert.Equal(t, "abort", parseGenerateStream(t, receive(t, aborted).body).finish)
	require.Equal(t, http.StatusOK, control(t, e, "POST", "/wake_up", "").status)

	// keep freezes them until the wake up.
	gate = gateAt(t, e, 1)
	kept := async(t, env.gateway.URL+pathGenerate, legHeader("decode", "z2"), generateBody("z2", 3, true))
	gate.wait(t)
	require.Equal(t, http.StatusOK, control(t, e, "POST", "/sleep?mode=keep", "").status)
	gate.release()
	require.NoError(t, e.WaitFrozen(waitCtx(t), 1))
	require.Equal(t, http.StatusOK, control(t, e, "POST", "/wake_up", "").status)
	s := parseGenerateStream(t, receive(t, kept).body)
	assert.Equal(t, "length", s.finish)
	assert.Len(t, s.tokenIDs, 3)
}
