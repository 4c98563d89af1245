package control

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"time"

	"buf.build/go/protovalidate"
	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
	"github.com/coordinator-project/coordinator/internal/fleet"
	"github.com/coordinator-project/coordinator/internal/legids"
	"github.com/coordinator-project/coordinator/service/admission"
	"github.com/coordinator-project/coordinator/service/metrics"
)

// The engine routes the RPCs call.
var (
	routePause        = route{method: http.MethodPost, path: "/pause"}
	routeResume       = route{method: http.MethodPost, path: "/resume"}
	routeSetVersion   = route{method: http.MethodPost, path: "/update_weight_version"}
	routeFinishUpdate = route{method: http.MethodPost, path: "/finish_weight_update"}
	routeAbort        = route{method: http.MethodPost, path: "/abort_requests"}
	routeListWorkers  = route{method: http.MethodGet, path: "/workers"} // the listing's label; asks the state routes
	stateRoutes       = []string{"/is_paused", "/is_sleeping", "/weight_info", "/get_world_size"}
	relayMethods      = map[string]string{"get_world_size": http.MethodGet, "is_sleeping": http.MethodGet}
	relayQueryKeys    = map[string][]string{"sleep": {"level"}, "get_world_size": {"include_dp"}, "wake_up": {"tags"}}
)

// Options are the Server's settings and collaborators.
type Options struct {
	// Members is the membership of the engines.
	Members *fleet.Membership
	// Hold is admission's hold of new requests, closed by Pause.
	Hold *admission.Hold
	// Version is the fleet's weight version the answers carry, learnt
	// from ListWorkers and SetWeightVersion (nil: not kept).
	Version *fleet.Version
	// InFlight maps a client's request ids to its legs' (AbortRequests).
	InFlight *legids.Registry
	// Metrics are the control plane's collectors.
	Metrics *metrics.Control
	// Log receives a line per call.
	Log *slog.Logger
	// CallTimeout bounds each worker's answer to a control route;
	// StateTimeout each worker's answers to ListWorkers.
	CallTimeout, StateTimeout time.Duration
	// Concurrency bounds the workers one call talks to at once.
	Concurrency int
}

// Server implements the ControlService.
type Server struct {
	coordinatorv1.UnimplementedControlServiceServer
	o         Options
	engines   *engines
	validator protovalidate.Validator

	mu sync.Mutex
	// paused are the workers paused through this server and not resumed
	// since: while there is one, new requests are held.
	paused map[string]bool
}

// New builds the server.
func New(o Options) (*Server, error) {
	v, err := protovalidate.New(protovalidate.WithMessages(
		&coordinatorv1.ListWorkersRequest{}, &coordinatorv1.PauseRequest{}, &coordinatorv1.ResumeRequest{},
		&coordinatorv1.SetWeightVersionRequest{}, &coordinatorv1.AbortRequestsRequest{}, &coordinatorv1.RelayRequest{},
	))
	if err != nil {
		return nil, fmt.Errorf("control: protovalidate: %w", err)
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	return &Server{o: o, engines: newEngines(), validator: v, paused: map[string]bool{}}, nil
}

// call is one control call in progress: what begin settled.
type call struct {
	route   route
	start   time.Time
	span    trace.Span
	epoch   uint64
	workers []fleet.Worker
}

// begin starts a call of r: it validates req, refreshes the membership,
// checks epoch (nil: none) and selects the workers of target.
func (s *Server) begin(ctx context.Context, r route, req proto.Message, target *coordinatorv1.Target, epoch *uint64) (context.Context, *call, error) {
	ctx, span := tracer.Start(ctx, "control "+r.name(), trace.WithSpanKind(trace.SpanKindServer))
	c := &call{route: r, start: time.Now(), span: span}
	if err := s.validator.Validate(req); err != nil {
		return ctx, c, status.Error(codes.InvalidArgument, err.Error())
	}
	if _, err := s.o.Members.Refresh(ctx); err != nil {
		s.o.Log.WarnContext(ctx, "control: membership refresh failed, using the last good answer", "err", err)
	}
	snap := s.o.Members.Current()
	if epoch != nil {
		var err error
		if snap, err = s.o.Members.At(*epoch); err != nil {
			return ctx, c, membershipChanged(err)
		}
	}
	c.epoch = snap.Epoch
	workers, err := selectWorkers(snap, target)
	if err != nil {
		return ctx, c, err
	}
	if len(workers) == 0 && r.path != routeListWorkers.path {
		return ctx, c, status.Errorf(codes.FailedPrecondition, "control: the call selects no worker (membership epoch %d has %d): nothing to %s", snap.Epoch, len(snap.Workers), r.name())
	}
	c.workers = workers
	span.SetAttributes(attribute.Int64("coordinator.fleet.epoch", int64(c.epoch)), attribute.Int("coordinator.fleet.workers", len(workers)))
	return ctx, c, nil
}

// selectWorkers are the snapshot's workers that target selects.
func selectWorkers(snap fleet.Snapshot, target *coordinatorv1.Target) ([]fleet.Worker, error) {
	switch {
	case target.GetWorkerId() != "":
		id := target.GetWorkerId()
		if i := slices.IndexFunc(snap.Workers, func(w fleet.Worker) bool { return w.ID == id }); i >= 0 {
			return snap.Workers[i : i+1], nil
		}
		return nil, status.Errorf(codes.NotFound, "control: no worker %q in the membership (epoch %d)", id, snap.Epoch)
	case target.GetRole() != "":
		return snap.Role(fleet.Role(target.GetRole())), nil
	}
	return snap.Workers, nil
}

// finish ends a call: it counts it, logs a line, ends its span and returns
// its error: err, else the workers' failure (nil when every worker
// succeeded).
func (s *Server) finish(ctx context.Context, c *call, results []*coordinatorv1.WorkerResult, err error) error {
	if err == nil {
		err = workerFailure(c.route, results)
	}
	outcome := metrics.ControlOK
	switch st := status.Convert(err); {
	case err == nil:
	case len(results) > 0 && st.Code() == codes.Unavailable:
		outcome = metrics.ControlWorkerFailed
	case st.Code() == codes.FailedPrecondition:
		outcome = metrics.ControlStaleEpoch
	default:
		outcome = metrics.ControlInvalid
	}
	d := time.Since(c.start)
	failed := 0
	for _, r := range results {
		if !r.GetOk() {
			failed++
			s.o.Metrics.WorkerFailed(c.route.name(), r.GetWorker().GetRole())
		}
	}
	s.o.Metrics.Call(c.route.name(), outcome, d)
	attrs := []slog.Attr{
		slog.String("route", c.route.name()), slog.String("outcome", outcome), slog.Uint64("epoch", c.epoch),
		slog.Int("workers", len(results)), slog.Int("failed", failed), slog.Duration("duration", d),
	}
	level := slog.LevelInfo
	if err != nil {
		level = slog.LevelWarn
		attrs = append(attrs, slog.String("error", status.Convert(err).Message()))
		c.span.SetStatus(otelcodes.Error, status.Convert(err).Message())
	}
	s.o.Log.LogAttrs(ctx, level, "control call", attrs...)
	c.span.End()
	return err
}

// post is a fan-out of r with the same body to every worker of c.
func (s *Server) post(ctx context.Context, c *call, r route, body []byte) []*coordinatorv1.WorkerResult {
	return fanOut(ctx, r.name(), c.workers, s.o.Concurrency, s.o.CallTimeout, func(ctx context.Context, _ int, w fleet.Worker) *coordinatorv1.WorkerResult {
		return s.engines.call(ctx, w, r, body)
	})
}

// ListWorkers implements ControlServiceServer.
func (s *Server) ListWorkers(ctx context.Context, req *coordinatorv1.ListWorkersRequest) (*coordinatorv1.ListWorkersResponse, error) {
	ctx, c, err := s.begin(ctx, routeListWorkers, req, req.GetTarget(), nil)
	if err != nil {
		return nil, s.finish(ctx, c, nil, err)
	}
	states := make([]*coordinatorv1.WorkerState, len(c.workers))
	fanOut(ctx, "workers", c.workers, s.o.Concurrency, s.o.StateTimeout, func(ctx context.Context, i int, w fleet.Worker) *coordinatorv1.WorkerResult {
		var res *coordinatorv1.WorkerResult
		states[i], res = s.state(ctx, w)
		return res
	})
	s.countFleet(c.epoch, states)
	if req.GetTarget().GetSelector() == nil {
		learnVersion(s.o.Version, states)
	}
	hold := s.o.Hold
	resp := &coordinatorv1.ListWorkersResponse{Epoch: c.epoch, Workers: states, FleetPaused: hold.Closed(), HeldRequests: uint32(hold.Waiting())}
	return resp, s.finish(ctx, c, nil, nil)
}

// learnVersion records the fleet's weight version from the states of
// every engine: the one all report, "" when they differ. An unreachable
// engine serves no answer: with one, nothing is learnt.
func learnVersion(v *fleet.Version, states []*coordinatorv1.WorkerState) {
	version := ""
	for i, st := range states {
		if !st.GetReachable() {
			return
		}
		if i > 0 && st.GetWeightVersion() != version {
			v.Set("")
			return
		}
		version = st.GetWeightVersion()
	}
	v.Set(version)
}

// state asks w's state routes in turn.
func (s *Server) state(ctx context.Context, w fleet.Worker) (*coordinatorv1.WorkerState, *coordinatorv1.WorkerResult) {
	st := &coordinatorv1.WorkerState{Worker: workerPB(w)}
	for _, path := range stateRoutes {
		res := s.engines.call(ctx, w, route{method: http.MethodGet, path: path}, nil)
		if !res.GetOk() {
			st.Error = path + ": " + res.GetError()
			return st, res
		}
		f := res.GetBody().GetFields()
		switch path {
		case "/is_paused":
			st.Paused = f["is_paused"].GetBoolValue()
		case "/is_sleeping":
			st.Sleeping = f["is_sleeping"].GetBoolValue()
		case "/weight_info":
			st.WeightVersion = f["weight_version"].GetStringValue()
		case "/get_world_size":
			st.WorldSize = uint32(f["world_size"].GetNumberValue())
		}
	}
	st.Reachable = true
	return st, &coordinatorv1.WorkerResult{Worker: st.Worker, Ok: true}
}

// countFleet sets the fleet gauges from a listing.
func (s *Server) countFleet(epoch uint64, states []*coordinatorv1.WorkerState) {
	counts := map[[2]string]int{}
	for _, st := range states {
		role := st.GetWorker().GetRole()
		counts[[2]string{role, metrics.FleetMember}]++
		for state, on := range map[string]bool{metrics.FleetReachable: st.Reachable, metrics.FleetPaused: st.Paused, metrics.FleetSleeping: st.Sleeping} {
			if on {
				counts[[2]string{role, state}]++
			}
		}
	}
	s.o.Metrics.Fleet(epoch, counts)
}

// Pause implements ControlServiceServer. The hold closes before the
// engines are asked, so no new request reaches one that paused; it opens
// again at once if no engine did.
func (s *Server) Pause(ctx context.Context, req *coordinatorv1.PauseRequest) (*coordinatorv1.PauseResponse, error) {
	ctx, c, err := s.begin(ctx, routePause, req, req.GetTarget(), req.Epoch)
	if err != nil {
		return nil, s.finish(ctx, c, nil, err)
	}
	mode := req.GetMode()
	if mode == "" {
		mode = "abort"
	}
	r := routePause
	r.query = url.Values{"mode": {mode}}
	s.mu.Lock()
	s.o.Hold.Close()
	s.mu.Unlock()
	results := s.post(ctx, c, r, nil)
	s.mu.Lock()
	for _, res := range results {
		if res.GetOk() {
			s.paused[res.GetWorker().GetId()] = true
		}
	}
	if len(s.paused) == 0 {
		s.o.Hold.Open()
	}
	s.mu.Unlock()
	return &coordinatorv1.PauseResponse{Epoch: c.epoch, Results: results}, s.finish(ctx, c, results, nil)
}

// Resume implements ControlServiceServer. Once no worker paused through
// this server is left paused (a worker gone from the membership counts as
// resumed), the held requests run.
func (s *Server) Resume(ctx context.Context, req *coordinatorv1.ResumeRequest) (*coordinatorv1.ResumeResponse, error) {
	ctx, c, err := s.begin(ctx, routeResume, req, req.GetTarget(), req.Epoch)
	if err != nil {
		return nil, s.finish(ctx, c, nil, err)
	}
	results := s.post(ctx, c, routeResume, nil)
	members := s.o.Members.Current()
	s.mu.Lock()
	for _, res := range results {
		if res.GetOk() {
			delete(s.paused, res.GetWorker().GetId())
		}
	}
	for id := range s.paused {
		if !slices.ContainsFunc(members.Workers, func(w fleet.Worker) bool { return w.ID == id }) {
			delete(s.paused, id)
		}
	}
	released := 0
	if len(s.paused) == 0 {
		released = s.o.Hold.Open()
	}
	s.mu.Unlock()
	return &coordinatorv1.ResumeResponse{Epoch: c.epoch, Results: results, ReleasedRequests: uint32(released)}, s.finish(ctx, c, results, nil)
}

// SetWeightVersion implements ControlServiceServer.
func (s *Server) SetWeightVersion(ctx context.Context, req *coordinatorv1.SetWeightVersionRequest) (*coordinatorv1.SetWeightVersionResponse, error) {
	r, field := routeSetVersion, "new_version"
	if req.GetFinishUpdate() {
		r, field = routeFinishUpdate, "weight_version"
	}
	ctx, c, err := s.begin(ctx, r, req, req.GetTarget(), req.Epoch)
	if err != nil {
		return nil, s.finish(ctx, c, nil, err)
	}
	body, _ := json.Marshal(map[string]string{field: req.GetVersion()})
	results := s.post(ctx, c, r, body)
	err = s.finish(ctx, c, results, nil)
	if err == nil && req.GetTarget().GetSelector() == nil {
		s.o.Version.Set(req.GetVersion())
	} else {
		s.o.Version.Set("") // some engines have it, or may
	}
	return &coordinatorv1.SetWeightVersionResponse{Epoch: c.epoch, Results: results}, err
}

// AbortRequests implements ControlServiceServer: the client ids named are
// sent with the ids of their requests' legs in flight.
func (s *Server) AbortRequests(ctx context.Context, req *coordinatorv1.AbortRequestsRequest) (*coordinatorv1.AbortRequestsResponse, error) {
	ctx, c, err := s.begin(ctx, routeAbort, req, req.GetTarget(), req.Epoch)
	if err != nil {
		return nil, s.finish(ctx, c, nil, err)
	}
	body := []byte(`{}`) // every request
	if ids := req.GetRequestIds(); len(ids) > 0 {
		body, _ = json.Marshal(map[string][]string{"request_ids": s.o.InFlight.Legs(ids)})
	}
	results := s.post(ctx, c, routeAbort, body)
	return &coordinatorv1.AbortRequestsResponse{Epoch: c.epoch, Results: results}, s.finish(ctx, c, results, nil)
}

// Relay implements ControlServiceServer.
func (s *Server) Relay(ctx context.Context, req *coordinatorv1.RelayRequest) (*coordinatorv1.RelayResponse, error) {
	r := route{method: http.MethodPost, path: "/" + req.GetRoute()}
	if m, ok := relayMethods[req.GetRoute()]; ok {
		r.method = m
	}
	ctx, c, err := s.begin(ctx, r, req, req.GetTarget(), req.Epoch)
	if err == nil {
		r.query, err = relayQuery(req)
	}
	var bodies map[string][]byte
	if err == nil {
		bodies, err = relayBodies(req, r, c.workers)
	}
	if err != nil {
		return nil, s.finish(ctx, c, nil, err)
	}
	results := fanOut(ctx, r.name(), c.workers, s.o.Concurrency, s.o.CallTimeout, func(ctx context.Context, _ int, w fleet.Worker) *coordinatorv1.WorkerResult {
		return s.engines.call(ctx, w, r, bodies[w.ID])
	})
	return &coordinatorv1.RelayResponse{Epoch: c.epoch, Results: results}, s.finish(ctx, c, results, nil)
}

// relayQuery is the relay's query, each key one its route takes.
func relayQuery(req *coordinatorv1.RelayRequest) (url.Values, error) {
	q := url.Values{}
	for k, v := range req.GetQuery() {
		if !slices.Contains(relayQueryKeys[req.GetRoute()], k) {
			return nil, status.Errorf(codes.InvalidArgument, "control: route %s takes no query parameter %q (it takes: %v)", req.GetRoute(), k, relayQueryKeys[req.GetRoute()])
		}
		q.Set(k, v)
	}
	return q, nil
}

// relayBodies is each worker's body: its own from worker_bodies, else the
// common one, as JSON; none for a GET route (which takes no body).
func relayBodies(req *coordinatorv1.RelayRequest, r route, workers []fleet.Worker) (map[string][]byte, error) {
	if r.method == http.MethodGet {
		if req.GetBody() != nil || len(req.GetWorkerBodies()) > 0 {
			return nil, status.Errorf(codes.InvalidArgument, "control: route %s takes no body", req.GetRoute())
		}
		return nil, nil
	}
	for id := range req.GetWorkerBodies() {
		if !slices.ContainsFunc(workers, func(w fleet.Worker) bool { return w.ID == id }) {
			return nil, status.Errorf(codes.InvalidArgument, "control: worker_bodies names %q, which the call does not target", id)
		}
	}
	common, err := marshalBody(req.GetBody())
	if err != nil {
		return nil, err
	}
	bodies := make(map[string][]byte, len(workers))
	for _, w := range workers {
		bodies[w.ID] = common
		if own, ok := req.GetWorkerBodies()[w.ID]; ok {
			if bodies[w.ID], err = marshalBody(own); err != nil {
				return nil, err
			}
		}
	}
	return bodies, nil
}

// marshalBody is a body as JSON, {} when absent.
func marshalBody(b *structpb.Struct) ([]byte, error) {
	if b == nil {
		return []byte(`{}`), nil
	}
	data, err := protojson.Marshal(b)
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "control: body: %v", err)
	}
	return data, nil
}
