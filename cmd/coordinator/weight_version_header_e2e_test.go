package main

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
	"github.com/coordinator-project/coordinator/sim"
)

// TestOpenAIAnswersNameTheFleetsWeightVersion: chat and completions
// answers carry x-weight-version, the fleet's weight version as the
// control plane knows it: none before it knows, the one every engine
// reported (ListWorkers) or was given (SetWeightVersion), both when it
// changed during a non-streamed answer.
func TestOpenAIAnswersNameTheFleetsWeightVersion(t *testing.T) {
	t.Parallel()
	r := startRLStack(t, sim.Options{Engines: sim.EngineCounts{Prefill: 1, Decode: 1}, TokenDelay: 10 * time.Millisecond})
	ctx := t.Context()
	chat := func(body string) *http.Response {
		resp := r.st.post(t, "/v1/chat/completions", `{"model":"`+sim.DefaultModel+`","messages":[{"role":"user","content":"hi"}],"max_tokens":3`+body+`}`, nil)
		readAll(t, resp.Body)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		return resp
	}
	assert.Empty(t, chat("").Header.Values("X-Weight-Version"), "unknown before the control plane asked")

	_, err := r.control.ListWorkers(ctx, &coordinatorv1.ListWorkersRequest{})
	require.NoError(t, err)
	assert.Equal(t, "v1", chat("").Header.Get("X-Weight-Version"))
	assert.Equal(t, "v1", chat(`,"stream":true`).Header.Get("X-Weight-Version"))
	completion := r.st.post(t, "/v1/completions", `{"model":"`+sim.DefaultModel+`","prompt":"hi","max_tokens":2}`, nil)
	readAll(t, completion.Body)
	assert.Equal(t, "v1", completion.Header.Get("X-Weight-Version"))

	across := make(chan *http.Response, 1)
	go func() {
		resp := r.st.post(t, "/v1/chat/completions", `{"model":"`+sim.DefaultModel+`","messages":[{"role":"user","content":"long"}],"max_tokens":200}`, nil)
		readAll(t, resp.Body)
		across <- resp
	}()
	require.NoError(t, r.engines("decode")[0].WaitStarted(waitCtx(t), 1, 2))
	_, err = r.control.Pause(ctx, &coordinatorv1.PauseRequest{Mode: "keep"})
	require.NoError(t, err)
	_, err = r.control.SetWeightVersion(ctx, &coordinatorv1.SetWeightVersionRequest{Version: "v2"})
	require.NoError(t, err)
	_, err = r.control.Resume(ctx, &coordinatorv1.ResumeRequest{})
	require.NoError(t, err)
	resp := <-across
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "v1,v2", resp.Header.Get("X-Weight-Version"), "the answer began on v1 and ended on v2")
	assert.Equal(t, "v2", chat("").Header.Get("X-Weight-Version"))

	_, err = r.control.SetWeightVersion(ctx, &coordinatorv1.SetWeightVersionRequest{Version: "v3", Target: &coordinatorv1.Target{Selector: &coordinatorv1.Target_Role{Role: "decode"}}})
	require.NoError(t, err)
	assert.Empty(t, chat("").Header.Values("X-Weight-Version"), "mixed: prefill v2, decode v3")
}
