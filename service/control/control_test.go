package control_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
	"github.com/coordinator-project/coordinator/internal/fleet"
	"github.com/coordinator-project/coordinator/internal/legids"
	"github.com/coordinator-project/coordinator/service/admission"
	"github.com/coordinator-project/coordinator/service/config"
	"github.com/coordinator-project/coordinator/service/control"
	"github.com/coordinator-project/coordinator/service/metrics"
	"github.com/coordinator-project/coordinator/sim"
)

// env is a ControlService on a real listener in front of engines.
type env struct {
	hold     *admission.Hold
	inFlight *legids.Registry
	client   coordinatorv1.ControlServiceClient
	url      string // the listener's base URL, for REST
	http     *http.Client
}

// envOptions shape an env.
type envOptions struct {
	token       string
	callTimeout time.Duration
	sources     []fleet.Source
	log         *slog.Logger
}

// newEnv serves the ControlService over the workers of o.sources (or of
// workers when there is none).
func newEnv(t *testing.T, workers []fleet.Worker, o envOptions) *env {
	t.Helper()
	if o.sources == nil {
		o.sources = []fleet.Source{fleet.Static(workers)}
	}
	if o.callTimeout == 0 {
		o.callTimeout = 10 * time.Second
	}
	members, err := fleet.New(fleet.Options{}, o.sources...)
	require.NoError(t, err)
	cfg := config.Default()
	hold := admission.NewHold(cfg, nil)
	m := metrics.New().NewControl(hold.Waiting, hold.Closed)
	e := &env{hold: hold, inFlight: &legids.Registry{}}
	srv, err := control.New(control.Options{
		Members: members, Hold: hold, InFlight: e.inFlight, Metrics: m, Log: o.log,
		CallTimeout: o.callTimeout, StateTimeout: 5 * time.Second, Concurrency: 4,
	})
	require.NoError(t, err)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	l := control.NewListener(control.NewHandler(srv, o.token, m), nil)
	go control.Serve(l, lis)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = control.Close(l, ctx)
	})
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	e.client = coordinatorv1.NewControlServiceClient(conn)
	e.url = "http://" + lis.Addr().String()
	e.http = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{}}
	t.Cleanup(e.http.CloseIdleConnections)
	return e
}

// engines starts simulated engines on loopback and returns them with
// their workers.
func engines(t *testing.T, counts sim.EngineCounts) ([]sim.Engine, []fleet.Worker) {
	t.Helper()
	s := sim.New(sim.Options{Engines: counts, WorldSize: 2})
	require.NoError(t, s.ListenEngines(t.Context(), "127.0.0.1:0"))
	t.Cleanup(s.CloseEngines)
	var workers []fleet.Worker
	for _, e := range s.Engines() {
		workers = append(workers, fleet.NewWorker(fleet.Role(e.Role), e.Addr))
	}
	return s.Engines(), workers
}

// rest calls a REST route of the env and returns the status and body.
func (e *env) rest(t *testing.T, method, path, body string, header http.Header) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, e.url+path, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := e.http.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(data)
}

func ids(results []*coordinatorv1.WorkerResult) []string {
	var out []string
	for _, r := range results {
		out = append(out, r.GetWorker().GetId())
	}
	return out
}

func TestPauseSetVersionResumeAcrossTheFleet(t *testing.T) {
	t.Parallel()
	engs, workers := engines(t, sim.EngineCounts{Prefill: 1, Decode: 2})
	e := newEnv(t, workers, envOptions{})
	ctx := t.Context()

	list, err := e.client.ListWorkers(ctx, &coordinatorv1.ListWorkersRequest{})
	require.NoError(t, err)
	require.Len(t, list.GetWorkers(), 4, "encode, prefill and two decode engines")
	for _, w := range list.GetWorkers() {
		assert.True(t, w.GetReachable(), w.GetError())
		assert.Equal(t, "v1", w.GetWeightVersion())
		assert.Equal(t, uint32(2), w.GetWorldSize())
		assert.False(t, w.GetPaused())
	}
	assert.False(t, list.GetFleetPaused())

	pause, err := e.client.Pause(ctx, &coordinatorv1.PauseRequest{Mode: "keep", Epoch: proto.Uint64(list.GetEpoch())})
	require.NoError(t, err)
	assert.Len(t, pause.GetResults(), 4)
	assert.True(t, e.hold.Closed(), "new requests are held while the fleet is paused")

	_, err = e.client.SetWeightVersion(ctx, &coordinatorv1.SetWeightVersionRequest{Version: "v2", Target: &coordinatorv1.Target{Selector: &coordinatorv1.Target_Role{Role: "decode"}}})
	require.NoError(t, err)
	list, err = e.client.ListWorkers(ctx, &coordinatorv1.ListWorkersRequest{})
	require.NoError(t, err)
	for _, w := range list.GetWorkers() {
		assert.True(t, w.GetPaused(), w.GetWorker().GetId())
		want := "v1"
		if w.GetWorker().GetRole() == "decode" {
			want = "v2"
		}
		assert.Equal(t, want, w.GetWeightVersion(), "the role's engines only: %s", w.GetWorker().GetId())
	}
	assert.True(t, list.GetFleetPaused())

	// A request arriving now waits at the hold, and runs on the resume.
	waited := make(chan error, 1)
	go func() { waited <- e.hold.Wait(context.Background(), nil) }()
	require.Eventually(t, func() bool { return e.hold.Waiting() == 1 }, 10*time.Second, time.Millisecond)
	resume, err := e.client.Resume(ctx, &coordinatorv1.ResumeRequest{})
	require.NoError(t, err)
	require.NoError(t, <-waited)
	assert.Equal(t, uint32(1), resume.GetReleasedRequests())
	assert.False(t, e.hold.Closed())
	for _, en := range engs {
		want := "v1"
		if en.Role == "decode" {
			want = "v2"
		}
		assert.Equal(t, want, en.WeightVersion(), en.ID)
	}
}

func TestADeadWorkerFailsTheCallAndNamesIt(t *testing.T) {
	t.Parallel()
	engs, workers := engines(t, sim.EngineCounts{Decode: 2})
	e := newEnv(t, workers, envOptions{callTimeout: 3 * time.Second})
	dead := workers[len(workers)-1] // decode/… of decode-1
	for _, en := range engs {
		if en.Addr == dead.Address {
			en.Stop()
		}
	}
	ctx := t.Context()

	_, err := e.client.Pause(ctx, &coordinatorv1.PauseRequest{Mode: "keep"})
	st := status.Convert(err)
	require.Equal(t, codes.Unavailable, st.Code(), "%v", err)
	assert.Contains(t, st.Message(), dead.ID)
	var failure *coordinatorv1.ControlFailure
	for _, d := range st.Details() {
		if f, ok := d.(*coordinatorv1.ControlFailure); ok {
			failure = f
		}
	}
	require.NotNil(t, failure, "the per-worker results ride in the status")
	assert.Equal(t, "/pause", failure.GetRoute())
	assert.Equal(t, []string{dead.ID}, failure.GetFailed())
	assert.Len(t, failure.GetChanged(), len(workers)-1, "the others did pause, and are named")
	assert.Len(t, failure.GetResults(), len(workers))
	assert.True(t, e.hold.Closed(), "the engines that paused are paused: new requests wait")

	code, body := e.rest(t, http.MethodPost, "/v1/rl/pause", `{"mode":"keep"}`, nil)
	assert.Equal(t, http.StatusBadGateway, code, body)
	var rest struct {
		Code    int
		Message string
		Details []map[string]any
	}
	require.NoError(t, json.Unmarshal([]byte(body), &rest), body)
	require.Len(t, rest.Details, 1, body)
	assert.Equal(t, "type.googleapis.com/coordinator.v1.ControlFailure", rest.Details[0]["@type"])
	assert.Equal(t, []any{dead.ID}, rest.Details[0]["failed"])

	list, err := e.client.ListWorkers(ctx, &coordinatorv1.ListWorkersRequest{})
	require.NoError(t, err, "a listing reports an unreachable worker, it does not fail")
	for _, w := range list.GetWorkers() {
		assert.Equal(t, w.GetWorker().GetId() != dead.ID, w.GetReachable(), w.GetWorker().GetId())
		assert.Equal(t, w.GetWorker().GetId() != dead.ID, w.GetPaused(), w.GetWorker().GetId())
	}

	_, err = e.client.Resume(ctx, &coordinatorv1.ResumeRequest{})
	assert.Equal(t, codes.Unavailable, status.Code(err), "the dead worker fails the resume too")
	assert.False(t, e.hold.Closed(), "every worker paused through the coordinator resumed: the hold opens")
}

func TestAWorkerThatDoesNotAnswerTimesOut(t *testing.T) {
	t.Parallel()
	stuck := make(chan struct{})
	srv := newLoopbackServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-stuck:
		}
	}))
	t.Cleanup(func() { close(stuck) })
	e := newEnv(t, []fleet.Worker{fleet.NewWorker(fleet.Decode, srv)}, envOptions{callTimeout: 300 * time.Millisecond})
	start := time.Now()
	_, err := e.client.SetWeightVersion(t.Context(), &coordinatorv1.SetWeightVersionRequest{Version: "v2"})
	assert.Less(t, time.Since(start), 20*time.Second, "bounded by control.call_timeout")
	st := status.Convert(err)
	require.Equal(t, codes.Unavailable, st.Code())
	assert.Contains(t, st.Message(), "no answer within 300ms")
}

// mutableSource is a membership source a test changes.
type mutableSource struct {
	mu      sync.Mutex
	workers []fleet.Worker
}

func (s *mutableSource) Resolve(context.Context) ([]fleet.Worker, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]fleet.Worker(nil), s.workers...), nil
}
func (s *mutableSource) Validate() error { return nil }
func (s *mutableSource) String() string  { return "test source" }
func (s *mutableSource) set(w []fleet.Worker) {
	s.mu.Lock()
	s.workers = w
	s.mu.Unlock()
}

func TestAMembershipChangeBetweenListAndPauseFailsTheCall(t *testing.T) {
	t.Parallel()
	engs, workers := engines(t, sim.EngineCounts{Decode: 2})
	src := &mutableSource{workers: workers[:len(workers)-1]}
	e := newEnv(t, nil, envOptions{sources: []fleet.Source{src}})
	ctx := t.Context()
	list, err := e.client.ListWorkers(ctx, &coordinatorv1.ListWorkersRequest{})
	require.NoError(t, err)

	src.set(workers) // a decode engine joins
	_, err = e.client.Pause(ctx, &coordinatorv1.PauseRequest{Mode: "keep", Epoch: proto.Uint64(list.GetEpoch())})
	st := status.Convert(err)
	require.Equal(t, codes.FailedPrecondition, st.Code(), "%v", err)
	assert.Contains(t, st.Message(), "added "+workers[len(workers)-1].ID)
	var changed *coordinatorv1.MembershipChanged
	for _, d := range st.Details() {
		if c, ok := d.(*coordinatorv1.MembershipChanged); ok {
			changed = c
		}
	}
	require.NotNil(t, changed)
	assert.Equal(t, list.GetEpoch(), changed.GetEpoch())
	assert.Equal(t, list.GetEpoch()+1, changed.GetCurrentEpoch())
	require.Len(t, changed.GetAdded(), 1)
	assert.Equal(t, workers[len(workers)-1].ID, changed.GetAdded()[0].GetId())
	assert.False(t, e.hold.Closed(), "nothing changed")
	for _, en := range engs {
		code, body := getJSON(t, "http://"+en.Addr+"/is_paused")
		require.Equal(t, http.StatusOK, code)
		assert.JSONEq(t, `{"is_paused":false}`, body, "no engine was paused: %s", en.ID)
	}

	code, body := e.rest(t, http.MethodPost, "/v1/rl/pause", `{"mode":"keep","epoch":"`+jsonUint(list.GetEpoch())+`"}`, nil)
	assert.Equal(t, http.StatusConflict, code, body)
	assert.Contains(t, body, "MEMBERSHIP_CHANGED")
}

func TestTheTokenIsRequired(t *testing.T) {
	t.Parallel()
	_, workers := engines(t, sim.EngineCounts{})
	e := newEnv(t, workers, envOptions{token: "s3cret"})
	ctx := t.Context()

	_, err := e.client.ListWorkers(ctx, &coordinatorv1.ListWorkersRequest{})
	assert.Equal(t, codes.Unauthenticated, status.Code(err), "%v", err)
	_, err = e.client.ListWorkers(metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer wrong"), &coordinatorv1.ListWorkersRequest{})
	assert.Equal(t, codes.Unauthenticated, status.Code(err), "%v", err)
	list, err := e.client.ListWorkers(metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer s3cret"), &coordinatorv1.ListWorkersRequest{})
	require.NoError(t, err)
	assert.Len(t, list.GetWorkers(), 3)

	code, body := e.rest(t, http.MethodPost, "/v1/rl/pause", `{}`, nil)
	assert.Equal(t, http.StatusUnauthorized, code, body)
	assert.False(t, e.hold.Closed(), "a refused call changes nothing")
	code, body = e.rest(t, http.MethodGet, "/v1/rl/workers", ``, http.Header{"Authorization": {"Bearer s3cret"}})
	assert.Equal(t, http.StatusOK, code, body)
	code, _ = e.rest(t, http.MethodGet, "/v1/chat/completions", ``, http.Header{"Authorization": {"Bearer s3cret"}})
	assert.Equal(t, http.StatusNotFound, code, "the control listener serves the control routes only")
}

func TestRelayGivesEachWorkerItsBody(t *testing.T) {
	t.Parallel()
	engs, workers := engines(t, sim.EngineCounts{Decode: 2})
	e := newEnv(t, workers, envOptions{})
	ctx := t.Context()
	decode := &coordinatorv1.Target{Selector: &coordinatorv1.Target_Role{Role: "decode"}}
	bodies := map[string]*structpb.Struct{}
	var decodeIDs []string
	for i, w := range workers {
		if w.Role == fleet.Decode {
			decodeIDs = append(decodeIDs, w.ID)
			b, err := structpb.NewStruct(map[string]any{"init_info": map[string]any{"rank_offset": 1 + 2*i, "master_port": 29500}})
			require.NoError(t, err)
			bodies[w.ID] = b
		}
	}
	resp, err := e.client.Relay(ctx, &coordinatorv1.RelayRequest{Route: "init_weight_transfer_engine", Target: decode, WorkerBodies: bodies})
	require.NoError(t, err)
	slices.Sort(decodeIDs)
	assert.Equal(t, decodeIDs, ids(resp.GetResults()), "one result per worker, sorted by id")
	for _, en := range engs {
		for i, w := range workers {
			if w.Address != en.Addr {
				continue
			}
			if w.Role != fleet.Decode {
				assert.Nil(t, en.InitInfo(), "not targeted: %s", w.ID)
				continue
			}
			assert.JSONEq(t, `{"master_port":29500,"rank_offset":`+jsonUint(uint64(1+2*i))+`}`, string(en.InitInfo()), w.ID)
		}
	}

	size, err := e.client.Relay(ctx, &coordinatorv1.RelayRequest{Route: "get_world_size", Query: map[string]string{"include_dp": "true"}})
	require.NoError(t, err)
	for _, r := range size.GetResults() {
		assert.Equal(t, 2.0, r.GetBody().GetFields()["world_size"].GetNumberValue(), r.GetWorker().GetId())
	}

	for name, bad := range map[string]*coordinatorv1.RelayRequest{
		"a route off the list":                {Route: "collective_rpc"},
		"a query key the route does not take": {Route: "sleep", Query: map[string]string{"include_dp": "1"}},
		"a body for a GET route":              {Route: "is_sleeping", Body: &structpb.Struct{}},
		"a body for a worker not targeted":    {Route: "update_weights", Target: decode, WorkerBodies: map[string]*structpb.Struct{workers[0].ID: {}}},
	} {
		_, err := e.client.Relay(ctx, bad)
		assert.Equal(t, codes.InvalidArgument, status.Code(err), "%s: %v", name, err)
	}
}

func TestAbortNamesTheLegsOfTheClientsRequests(t *testing.T) {
	t.Parallel()
	seen := make(chan string, 1)
	srv := newLoopbackServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		seen <- r.URL.Path + " " + string(body)
		_, _ = io.WriteString(w, `{"status":"aborted","aborted":1}`)
	}))
	e := newEnv(t, []fleet.Worker{fleet.NewWorker(fleet.Decode, srv)}, envOptions{})
	remove := e.inFlight.Add("rollout-7", "rollout-7-00000000000000ab")
	defer remove()

	_, err := e.client.AbortRequests(t.Context(), &coordinatorv1.AbortRequestsRequest{RequestIds: []string{"rollout-7"}})
	require.NoError(t, err)
	assert.Equal(t, `/abort_requests {"request_ids":["rollout-7","rollout-7-00000000000000ab"]}`, <-seen)

	_, err = e.client.AbortRequests(t.Context(), &coordinatorv1.AbortRequestsRequest{})
	require.NoError(t, err)
	assert.Equal(t, `/abort_requests {}`, <-seen, "no id: every request")
}

func TestInvalidCallsAreRefusedBeforeAnyWorker(t *testing.T) {
	t.Parallel()
	_, workers := engines(t, sim.EngineCounts{})
	e := newEnv(t, workers, envOptions{})
	ctx := t.Context()
	_, err := e.client.Pause(ctx, &coordinatorv1.PauseRequest{Mode: "later"})
	assert.Equal(t, codes.InvalidArgument, status.Code(err))
	_, err = e.client.Pause(ctx, &coordinatorv1.PauseRequest{Target: &coordinatorv1.Target{Selector: &coordinatorv1.Target_WorkerId{WorkerId: "decode/10.9.9.9:1"}}})
	assert.Equal(t, codes.NotFound, status.Code(err))
	assert.False(t, e.hold.Closed())
	_, err = e.client.Pause(ctx, &coordinatorv1.PauseRequest{Target: &coordinatorv1.Target{Selector: &coordinatorv1.Target_Role{Role: "encode"}}})
	assert.Equal(t, codes.OK, status.Code(err), "the default fleet has an encode engine")
	_, err = e.client.Resume(ctx, &coordinatorv1.ResumeRequest{})
	require.NoError(t, err)

	empty := newEnv(t, nil, envOptions{sources: []fleet.Source{&mutableSource{}}})
	_, err = empty.client.Pause(ctx, &coordinatorv1.PauseRequest{})
	assert.Equal(t, codes.FailedPrecondition, status.Code(err), "a pause that would reach no engine is not a success: %v", err)
	assert.False(t, empty.hold.Closed())
	list, err := empty.client.ListWorkers(ctx, &coordinatorv1.ListWorkersRequest{})
	require.NoError(t, err, "an empty listing is one")
	assert.Empty(t, list.GetWorkers())

	code, body := e.rest(t, http.MethodPost, "/v1/rl/pause", `{"mode":"later"}`, nil)
	assert.Equal(t, http.StatusBadRequest, code, body)
	code, body = e.rest(t, http.MethodPost, "/v1/rl/weight_version", `{"version":""}`, nil)
	assert.Equal(t, http.StatusBadRequest, code, body)
}

// newLoopbackServer serves h on 127.0.0.1 and returns its host:port.
func newLoopbackServer(t *testing.T, h http.Handler) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(func() { _ = srv.Close() })
	return lis.Addr().String()
}

func getJSON(t *testing.T, url string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(data)
}

func jsonUint(n uint64) string { b, _ := json.Marshal(n); return string(b) }

// TestAnEngineErrorIsKeptAsValidText: an engine's error answer, long and
// not ASCII (or not UTF-8 at all), is cut on a rune boundary and made
// valid UTF-8: the per-worker results still travel in the status.
func TestAnEngineErrorIsKeptAsValidText(t *testing.T) {
	t.Parallel()
	for name, body := range map[string]string{
		"long, not ASCII": `{"error":"` + strings.Repeat("é", 600) + `"}`,
		"not UTF-8":       "\xff\xfe broken",
	} {
		srv := newLoopbackServer(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = io.WriteString(w, body)
		}))
		e := newEnv(t, []fleet.Worker{fleet.NewWorker(fleet.Decode, srv)}, envOptions{})
		_, err := e.client.Resume(t.Context(), &coordinatorv1.ResumeRequest{})
		st := status.Convert(err)
		require.Equal(t, codes.Unavailable, st.Code(), "%s: %v", name, err)
		require.Len(t, st.Details(), 1, name)
		msg := st.Details()[0].(*coordinatorv1.ControlFailure).GetResults()[0].GetError()
		assert.True(t, utf8.ValidString(msg), name)
		assert.LessOrEqual(t, len(msg), 600, "%s: cut", name)
	}
}

// TestAHugeEngineAnswerIsCut: an engine answering past 1 MiB fails its
// result without the coordinator holding more than the cap of it.
func TestAHugeEngineAnswerIsCut(t *testing.T) {
	t.Parallel()
	srv := newLoopbackServer(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		chunk := []byte(strings.Repeat("x", 64<<10))
		for range 256 { // 16 MiB, more than the reader ever takes
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
	e := newEnv(t, []fleet.Worker{fleet.NewWorker(fleet.Decode, srv)}, envOptions{})
	_, err := e.client.Resume(t.Context(), &coordinatorv1.ResumeRequest{})
	st := status.Convert(err)
	require.Equal(t, codes.Unavailable, st.Code(), "%v", err)
	res := st.Details()[0].(*coordinatorv1.ControlFailure).GetResults()[0]
	assert.Equal(t, "answer over 1048576 bytes", res.GetError())
	assert.Nil(t, res.GetBody())
}
