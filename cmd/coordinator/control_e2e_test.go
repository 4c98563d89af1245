package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
	"github.com/coordinator-project/coordinator/service"
	"github.com/coordinator-project/coordinator/sim"
)

// controlPD is the P/D pipeline with the control listener over the
// simulator's engines (STATIC: their list).
const controlPD = `
pipeline:
  kv_connector: kv-nixl
  steps:
    - type: render
      params:
        address: "RENDER_URL"
    - type: prefill
    - type: decode
control:
  listen_addr: "127.0.0.1:0"
  call_timeout: 5s
  hold: {max_wait: HOLD_WAIT, max_requests: 64}
  membership:
    static:
STATIC`

// rlStack is a coordinator with its control plane in front of simulated
// engines.
type rlStack struct {
	sim     *sim.Sim
	st      *stack
	control coordinatorv1.ControlServiceClient
	gen     coordinatorv1.CoordinatorServiceClient
}

// startRLStack starts the simulator with its engines on loopback and the
// coordinator with the control plane over them.
func startRLStack(t *testing.T, opts sim.Options) *rlStack {
	t.Helper()
	return startRLStackHolding(t, opts, "1m")
}

// startRLStackHolding is startRLStack with control.hold.max_wait holdWait.
func startRLStackHolding(t *testing.T, opts sim.Options, holdWait string) *rlStack {
	t.Helper()
	opts.Strict = true
	s, gw, render := startSim(t, opts)
	require.NoError(t, s.ListenEngines(t.Context(), "127.0.0.1:0"))
	t.Cleanup(s.CloseEngines)
	var static strings.Builder
	for _, e := range s.Engines() {
		fmt.Fprintf(&static, "      - {role: %s, address: %q}\n", e.Role, e.Addr)
	}
	var addrs *service.Addresses
	st := startStack(t, gw, render, strings.NewReplacer("STATIC", static.String(), "HOLD_WAIT", holdWait).Replace(controlPD), fx.Populate(&addrs))
	conn, err := grpc.NewClient(addrs.Control(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return &rlStack{sim: s, st: st, control: coordinatorv1.NewControlServiceClient(conn), gen: coordinatorv1.NewCoordinatorServiceClient(st.conn)}
}

// engines are the simulator's engines of role.
func (r *rlStack) engines(role string) []sim.Engine {
	var out []sim.Engine
	for _, e := range r.sim.Engines() {
		if e.Role == role {
			out = append(out, e)
		}
	}
	return out
}

// rollout is one streamed tokens request's outcome.
type rollout struct {
	id     string
	prompt []uint32
	views  []choiceView
	// spans are the weight versions of its (one) choice's tokens.
	spans []spanView
	err   error
}

// receive reads a rollout's stream to its end: its choices merged, and
// the weight versions its last chunk carries.
func (ro *rollout) receive(stream grpc.ServerStreamingClient[coordinatorv1.GenerateStreamResponse], started chan<- string) error {
	for first := true; ; first = false {
		msg, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if first && started != nil {
			started <- ro.id
		}
		choices := msg.GetTokens().GetChoices()
		if ro.views, err = viewOf(choices, ro.views, true); err != nil {
			return err
		}
		for _, c := range choices {
			if len(c.GetWeightVersions()) > 0 {
				ro.spans = spansOf(c)
			}
		}
	}
}

// startRollouts streams n tokens rollouts of maxTokens each, ids
// prefix-0..n-1, and returns a channel of their outcomes.
func (r *rlStack) startRollouts(prefix string, n int, maxTokens uint32) <-chan rollout {
	return r.startRolloutsNoting(prefix, n, maxTokens, nil)
}

// startRolloutsNoting is startRollouts sending each rollout's id on
// started (buffered for n) once its first tokens arrived.
func (r *rlStack) startRolloutsNoting(prefix string, n int, maxTokens uint32, started chan<- string) <-chan rollout {
	out := make(chan rollout, n)
	for i := range n {
		go func() {
			ro := rollout{id: fmt.Sprintf("%s-%d", prefix, i), prompt: []uint32{uint32(100 + i), 7, 8, 9}}
			stream, err := r.gen.GenerateStream(context.Background(), &coordinatorv1.GenerateStreamRequest{
				RequestId: ro.id,
				Input: &coordinatorv1.GenerateStreamRequest_Tokens{Tokens: &coordinatorv1.TokensRequest{
					Model: sim.DefaultModel, TokenIds: ro.prompt,
					Sampling: &coordinatorv1.SamplingParams{MaxTokens: proto.Uint32(maxTokens), IgnoreEos: true},
				}},
			})
			if err == nil {
				err = ro.receive(stream, started)
			}
			ro.err = err
			out <- ro
		}()
	}
	return out
}

func (ro rollout) rolloutID() string { return ro.id }

func waitCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// TestRLStepKeepsEveryRollout is the RL cycle of docs/rl.md through the
// control plane: 64 streamed rollouts in flight across 2 prefill and 2
// decode engines, pause (keep), weight version v2 on all four, resume.
// Every rollout completes exactly once with all its tokens; the requests
// sent during the pause wait at the coordinator (none reaches a paused
// engine) and run after the resume.
func TestRLStepKeepsEveryRollout(t *testing.T) {
	t.Parallel()
	const rollouts, held, maxTokens = 64, 4, 60
	r := startRLStack(t, sim.Options{Engines: sim.EngineCounts{Prefill: 2, Decode: 2}, TokenDelay: 100 * time.Millisecond})
	ctx := t.Context()
	list, err := r.control.ListWorkers(ctx, &coordinatorv1.ListWorkersRequest{})
	require.NoError(t, err)
	require.Len(t, list.GetWorkers(), 5, "1 encode, 2 prefill, 2 decode engines")

	started := make(chan string, rollouts)
	inFlight := r.startRolloutsNoting("rollout", rollouts, maxTokens, started)
	for range rollouts { // each has tokens of v1 before the pause
		select {
		case <-started:
		case <-time.After(time.Minute):
			t.Fatal("the rollouts did not all start")
		}
	}
	_, err = r.control.Pause(ctx, &coordinatorv1.PauseRequest{Mode: "keep", Epoch: proto.Uint64(list.GetEpoch())})
	require.NoError(t, err)

	during := r.startRollouts("held", held, maxTokens)
	require.Eventually(t, func() bool {
		l, err := r.control.ListWorkers(ctx, &coordinatorv1.ListWorkersRequest{})
		return err == nil && l.GetHeldRequests() == held && l.GetFleetPaused()
	}, time.Minute, 5*time.Millisecond, "the requests sent during the pause wait at admission")
	for _, e := range r.engines("decode") {
		require.NoError(t, e.WaitFrozen(waitCtx(t), rollouts/2), "round robin: half frozen on each decode engine, and none of the held reached one")
	}

	_, err = r.control.SetWeightVersion(ctx, &coordinatorv1.SetWeightVersionRequest{Version: "v2", Epoch: proto.Uint64(list.GetEpoch())})
	require.NoError(t, err)
	resume, err := r.control.Resume(ctx, &coordinatorv1.ResumeRequest{Epoch: proto.Uint64(list.GetEpoch())})
	require.NoError(t, err)
	assert.Equal(t, uint32(held), resume.GetReleasedRequests())

	for i, got := range []map[string]rollout{collectRollouts(t, inFlight, rollouts), collectRollouts(t, during, held)} {
		for id, ro := range got {
			require.NoError(t, ro.err, id)
			require.Len(t, ro.views, 1, id)
			assert.Equal(t, sim.CompletionTokens(ro.prompt, maxTokens, 0), ro.views[0].IDs, "%s: every token once, in order", id)
			assert.Equal(t, coordinatorv1.FinishReason_FINISH_REASON_LENGTH, ro.views[0].Finish, id)
			assert.Len(t, pdLegs(r.sim, id, "decode"), 1, "%s: one decode leg, never sent again", id)
			if i == 1 {
				assert.Equal(t, []spanView{{Version: "v2", Start: 0, Count: maxTokens}}, ro.spans, "%s: started after the resume, all v2", id)
				continue
			}
			require.Len(t, ro.spans, 2, "%s: v1 before the pause, v2 after it: %v", id, ro.spans)
			assert.Equal(t, "v1", ro.spans[0].Version, id)
			assert.Equal(t, "v2", ro.spans[1].Version, id)
			assert.Equal(t, uint32(maxTokens), ro.spans[0].Count+ro.spans[1].Count, id)
		}
	}
	for _, e := range r.sim.Engines() {
		assert.Equal(t, "v2", e.WeightVersion(), e.ID)
	}
}

// TestAKilledEngineFailsThePauseAndNothingHangs: an engine killed before a
// pause fails the call, named, within its timeout; the others' state is
// reported; the resume opens the door again.
func TestAKilledEngineFailsThePauseAndNothingHangs(t *testing.T) {
	t.Parallel()
	r := startRLStack(t, sim.Options{Engines: sim.EngineCounts{Prefill: 2, Decode: 2}})
	ctx := t.Context()
	dead := r.engines("decode")[1]
	dead.Stop()
	deadID := "decode/" + dead.Addr

	start := time.Now()
	_, err := r.control.Pause(ctx, &coordinatorv1.PauseRequest{Mode: "keep"})
	assert.Less(t, time.Since(start), 30*time.Second)
	st := status.Convert(err)
	require.Equal(t, codes.Unavailable, st.Code(), "%v", err)
	assert.Contains(t, st.Message(), deadID)
	var failure *coordinatorv1.ControlFailure
	for _, d := range st.Details() {
		if f, ok := d.(*coordinatorv1.ControlFailure); ok {
			failure = f
		}
	}
	require.NotNil(t, failure)
	assert.Equal(t, []string{deadID}, failure.GetFailed())
	assert.Len(t, failure.GetChanged(), 4, "the other four paused")

	list, err := r.control.ListWorkers(ctx, &coordinatorv1.ListWorkersRequest{})
	require.NoError(t, err)
	for _, w := range list.GetWorkers() {
		alive := w.GetWorker().GetId() != deadID
		assert.Equal(t, alive, w.GetReachable(), w.GetWorker().GetId())
		assert.Equal(t, alive, w.GetPaused(), w.GetWorker().GetId())
	}
	_, err = r.control.Resume(ctx, &coordinatorv1.ResumeRequest{})
	assert.Equal(t, codes.Unavailable, status.Code(err))
	got := collectRollouts(t, r.startRollouts("after", 2, 4), 2)
	for id, ro := range got {
		require.NoError(t, ro.err, "%s: served by the live engines once resumed", id)
	}
}

// TestThePublicPortsDoNotServeTheControlService: REST 404 on /v1/rl/ and
// the engines' own control routes, gRPC UNIMPLEMENTED.
func TestThePublicPortsDoNotServeTheControlService(t *testing.T) {
	t.Parallel()
	r := startRLStack(t, sim.Options{})
	for _, path := range []string{"/v1/rl/pause", "/v1/rl/workers", "/pause", "/update_weights", "/sleep", "/resume/"} {
		resp := r.st.post(t, path, `{}`, nil)
		assert.Equal(t, http.StatusNotFound, resp.StatusCode, path)
	}
	_, err := coordinatorv1.NewControlServiceClient(r.st.conn).ListWorkers(t.Context(), &coordinatorv1.ListWorkersRequest{})
	assert.Equal(t, codes.Unimplemented, status.Code(err), "%v", err)
	for _, e := range r.sim.Engines() {
		assert.Equal(t, "v1", e.WeightVersion(), "nothing reached an engine")
	}
	_, err = r.control.ListWorkers(t.Context(), &coordinatorv1.ListWorkersRequest{})
	require.NoError(t, err, "the control listener does")
}

// TestTheControlPortRefusesAClientWithoutTokenOrCertificate: with
// control.tls requiring a client certificate and control.token_file, a
// client lacking either is refused; one with both is served.
func TestTheControlPortRefusesAClientWithoutTokenOrCertificate(t *testing.T) {
	t.Parallel()
	pki := newPKI(t)
	cert, key := pki.issue(t, "control", "coordinator-control")
	tokenFile := filepath.Join(pki.dir, "token")
	require.NoError(t, os.WriteFile(tokenFile, []byte("s3cret\n"), 0o600))
	_, gw, render := startSim(t, sim.Options{})
	var addrs *service.Addresses
	startStackEnv(t, map[string]string{
		"COORDINATOR_CONTROL_TLS_CERT_FILE":      cert,
		"COORDINATOR_CONTROL_TLS_KEY_FILE":       key,
		"COORDINATOR_CONTROL_TLS_CLIENT_CA_FILE": pki.caFile,
		"COORDINATOR_CONTROL_TOKEN_FILE":         tokenFile,
	}, gw, render, decodeOnly+`
control:
  listen_addr: "127.0.0.1:0"
`, fx.Populate(&addrs))
	addr := addrs.Control()

	call := func(clientCert *tls.Certificate, token string) error {
		cfg := &tls.Config{RootCAs: pki.ca.Pool()}
		if clientCert != nil {
			cfg.Certificates = []tls.Certificate{*clientCert}
		}
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
		require.NoError(t, err)
		defer conn.Close()
		ctx := t.Context()
		if token != "" {
			ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
		}
		_, err = coordinatorv1.NewControlServiceClient(conn).ListWorkers(ctx, &coordinatorv1.ListWorkersRequest{})
		return err
	}
	assert.Error(t, call(nil, "s3cret"), "no client certificate: the handshake fails")
	assert.Equal(t, codes.Unauthenticated, status.Code(call(&pki.client, "")), "no token")
	assert.Equal(t, codes.Unauthenticated, status.Code(call(&pki.client, "guess")), "a wrong token")
	require.NoError(t, call(&pki.client, "s3cret"), "both")

	get := func(client *http.Client, token string) (int, error) {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "https://"+addr+"/v1/rl/workers", nil)
		require.NoError(t, err)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	_, err := get(pki.restClient(t, nil, false), "s3cret")
	assert.Error(t, err, "REST without a client certificate")
	code, err := get(pki.restClient(t, &pki.client, false), "")
	require.NoError(t, err)
	assert.Equal(t, http.StatusUnauthorized, code)
	code, err = get(pki.restClient(t, &pki.client, true), "s3cret")
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, code)
}

// TestARequestHeldPastTheBoundGets503: while the fleet is paused, a REST
// request that waited control.hold.max_wait gets 503 with Retry-After, in
// the OpenAI error JSON; the resume lets the next one through.
func TestARequestHeldPastTheBoundGets503(t *testing.T) {
	t.Parallel()
	r := startRLStackHolding(t, sim.Options{}, "300ms")
	_, err := r.control.Pause(t.Context(), &coordinatorv1.PauseRequest{Mode: "wait"})
	require.NoError(t, err)
	body := `{"model":"` + sim.DefaultModel + `","messages":[{"role":"user","content":"hi"}],"max_tokens":2}`
	resp := r.st.post(t, "/v1/chat/completions", body, nil)
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	assert.Equal(t, "1", resp.Header.Get("Retry-After"))
	msg := readAll(t, resp.Body)
	assert.Contains(t, msg, "control.hold.max_wait (300ms)")
	assert.Contains(t, msg, `"error"`)

	_, err = r.control.Resume(t.Context(), &coordinatorv1.ResumeRequest{})
	require.NoError(t, err)
	resp = r.st.post(t, "/v1/chat/completions", body, nil)
	assert.Equal(t, http.StatusOK, resp.StatusCode, readAll(t, resp.Body))
}
