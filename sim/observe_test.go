package sim

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestOnLegEndReportsEachLegsContextEnd(t *testing.T) {
	t.Parallel()
	ends := make(chan LegEnd, 4)
	e := newTestEnv(t, Options{OnLegEnd: func(l LegEnd) { ends <- l }})

	// A leg that completes: its context ends when the handler returns.
	h := legHeader("prefill", "done-1")
	resp := post(t, e.gateway.URL+"/v1/completions", h, `{"model":"sim-model","prompt":"x","max_tokens":1,"stream":false}`)
	require.Equal(t, http.StatusOK, resp.status, string(resp.body))
	end := waitLegEnd(t, ends)
	assert.Equal(t, LegEnd{Target: FaultTargetPrefill, RequestID: "done-1", At: end.At}, end)

	// A hanging render leg: its context ends when the client goes away.
	ctx, cancel := context.WithCancel(t.Context())
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.render.URL+pathChatRender,
		strings.NewReader(`{"model":"sim-model","messages":[{"role":"user","content":"hi"}]}`))
	require.NoError(t, err)
	req.Header = legHeader("", "hang-1")
	req.Header.Set(FaultHeader, "render=hang")
	errc := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	require.Eventually(t, func() bool { return len(e.sim.Legs()) == 2 }, 5*time.Second, time.Millisecond)
	select {
	case l := <-ends:
		t.Fatalf("leg ended before the client left: %+v", l)
	case <-time.After(20 * time.Millisecond):
	}
	cancelled := time.Now()
	cancel()
	end = waitLegEnd(t, ends)
	assert.Equal(t, FaultTargetRender, end.Target)
	assert.Equal(t, "hang-1", end.RequestID)
	assert.False(t, end.At.Before(cancelled), "the context ended after the client left")
	require.ErrorIs(t, <-errc, context.Canceled)
}

func waitLegEnd(t *testing.T, ends <-chan LegEnd) LegEnd {
	t.Helper()
	select {
	case l := <-ends:
		return l
	case <-time.After(5 * time.Second):
		require.FailNow(t, "no leg end reported")
		return LegEnd{}
	}
}
