// Package service is the coordinator's inbound side: the gRPC server and
// its CoordinatorService, which builds each request's context, runs the
// pipeline and maps the outcome to a gRPC status. The REST front
// (service/rest) reaches it through the in-process Channel (internal/inproc),
// which runs the same interceptors as the network server.
package service

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
	"github.com/coordinator-project/coordinator/internal/fleet"
	"github.com/coordinator-project/coordinator/internal/frontdoor"
	"github.com/coordinator-project/coordinator/internal/gateway"
	"github.com/coordinator-project/coordinator/internal/headers"
	"github.com/coordinator-project/coordinator/internal/jsonbody"
	"github.com/coordinator-project/coordinator/internal/legids"
	"github.com/coordinator-project/coordinator/internal/requestbody"
	"github.com/coordinator-project/coordinator/internal/wire/bodykeys"
	"github.com/coordinator-project/coordinator/internal/wire/legs"
	"github.com/coordinator-project/coordinator/service/admission"
	"github.com/coordinator-project/coordinator/service/apierror"
	"github.com/coordinator-project/coordinator/service/config"
	"github.com/coordinator-project/coordinator/service/metrics"
	"github.com/coordinator-project/coordinator/service/responses"
	"github.com/coordinator-project/coordinator/service/tracing"
	"github.com/coordinator-project/coordinator/steps"
)

// Coordinator implements CoordinatorService over the pipeline.
type Coordinator struct {
	coordinatorv1.UnimplementedCoordinatorServiceServer
	pipeline *steps.Pipeline
	metrics  *metrics.Metrics
	log      *slog.Logger
	maxBody  int64 // server.max_request_body_size in bytes
	// trustTransfer keeps a client's transfer params
	// (server.trust_client_transfer_params).
	trustTransfer bool
	// limits bound a body's structure as it is parsed (server.max_messages,
	// max_content_blocks, max_json_nodes).
	limits requestbody.Limits
	// clientIDOnLegs sends the client's request id on the legs as it is
	// (server.client_request_id_on_legs).
	clientIDOnLegs bool
	// trusted are the routing headers a client may set
	// (server.trusted_routing_headers).
	trusted headers.Trusted
	// inFlight names each request's legs by its client's id, for the
	// control plane's abort by id.
	inFlight *legids.Registry
	// dpSize and sessionHeader pin a request's prefill and decode legs to
	// one data-parallel rank (pipeline.dp_size, pipeline.session_header).
	dpSize        int
	sessionHeader string
	// versionPolicy is pipeline.version_policy (weight_versions.go).
	versionPolicy string
	// responses keeps the stored Responses (responses.store); nil: off,
	// the coordinator is stateless.
	responses *responses.Store
	// admission and its hold, with the control plane on: a request a
	// pause aborted waits for the resume and is continued
	// (continuation.go). nil: never.
	admission *admission.Controller
	hold      *admission.Hold
	// maxAnswer bounds the output a continued request keeps
	// (gateway.max_answer_size).
	maxAnswer int64
	// fleetVersion is the fleet's weight version as the control plane
	// knows it (x-weight-version); nil: control plane off.
	fleetVersion *fleet.Version
}

// NewCoordinator builds the service for cfg's body size cap and trust of
// client transfer params, recording its requests in flight in inFlight.
func NewCoordinator(p *steps.Pipeline, m *metrics.Metrics, log *slog.Logger, cfg config.Config, inFlight *legids.Registry) *Coordinator {
	return &Coordinator{pipeline: p, metrics: m, log: log, maxBody: cfg.Server.MaxRequestBodyBytes(), limits: cfg.Server.DocumentLimits(),
		trustTransfer: cfg.Server.TrustClientTransferParams, clientIDOnLegs: cfg.Server.ClientRequestIDOnLegs,
		trusted: headers.NewTrusted(cfg.Server.TrustedRoutingHeaders...), inFlight: inFlight,
		dpSize: cfg.Pipeline.DPSize, sessionHeader: cmp.Or(cfg.Pipeline.SessionHeader, headers.SessionID),
		versionPolicy: cmp.Or(cfg.Pipeline.VersionPolicy, config.VersionPolicyAny), maxAnswer: cfg.Gateway.MaxAnswerBytes()}
}

// requestContext is newRequestContext for a body within
// server.max_request_body_size, the cap REST applies as it reads: the gRPC
// message limit leaves room for the envelope, so it alone would let gRPC
// clients send more. Unless server.trust_client_transfer_params is on, the
// client's own transfer params are removed from the document before any
// step sees it (compat D23). A client's media uuids always are: the
// coordinator owns the key vLLM caches media under.
func (c *Coordinator) requestContext(ctx context.Context, id, legID string, in *coordinatorv1.OpenAIRequest) (*steps.RequestContext, *responses.Turn, error) {
	if n := int64(len(in.GetJson())); n > c.maxBody {
		return nil, nil, status.Errorf(codes.ResourceExhausted, "request body too large: %d bytes, the limit is %d (request_id: %s)", n, c.maxBody, id)
	}
	var turn *responses.Turn
	var begin beginTurn
	if c.responses != nil {
		begin = func(doc *requestbody.Document) (*requestbody.Document, error) {
			var err error
			turn, doc, err = c.beginTurn(ctx, id, doc)
			return doc, err
		}
	}
	rc, err := newRequestContext(ctx, id, in, c.limits, begin)
	if err != nil {
		return rc, nil, err
	}
	rc.LegRequestID = legID
	c.routeLegs(ctx, rc)
	if n := rc.Doc.DropMediaUUIDs(); n > 0 {
		c.log.InfoContext(ctx, "client media uuids dropped", "request_id", id, "api", apiOf(ctx), "endpoint", rc.Format.String(), "parts", n)
	}
	if c.trustTransfer {
		return rc, turn, nil
	}
	if dropped := rc.Doc.DropTransferParams(); dropped != nil {
		TransferParamsDropped(ctx, c.metrics, c.log, id, apiOf(ctx), rc.Format.String(), dropped)
	}
	return rc, turn, nil
}

// Generate implements CoordinatorServiceServer.
func (c *Coordinator) Generate(ctx context.Context, req *coordinatorv1.GenerateRequest) (*coordinatorv1.GenerateResponse, error) {
	ctx = withSession(ctx, req.GetSessionId())
	id, legID := c.requestIDs(ctx, req.GetRequestId())
	defer c.inFlight.Add(id, legID)()
	_ = grpc.SetHeader(ctx, metadata.Pairs(headerRequestID, id))
	in := req.GetOpenai()
	if in == nil {
		return c.generateTokens(ctx, id, legID, req.GetTokens())
	}
	rc, turn, err := c.requestContext(ctx, id, legID, in)
	if err != nil {
		return nil, err
	}
	if rc.Stream {
		return nil, status.Errorf(codes.InvalidArgument, `"stream": true needs GenerateStream (request_id: %s)`, id)
	}
	if cont, err := c.relayContinuation(ctx, id, rc); err != nil || cont != nil {
		if err != nil {
			return nil, err
		}
		return c.relayContinued(ctx, id, legID, rc, cont)
	}
	sink := &unarySink{}
	rc.Sink = turn.Sink(sink)
	err = c.run(ctx, rc, "Generate")
	turn.Finish(ctx, c.log, id)
	if err != nil {
		return nil, err
	}
	return sink.answer(id)
}

// GenerateStream implements CoordinatorServiceServer.
func (c *Coordinator) GenerateStream(req *coordinatorv1.GenerateStreamRequest, stream grpc.ServerStreamingServer[coordinatorv1.GenerateStreamResponse]) error {
	stream = withSessionStream(stream, req)
	ctx := stream.Context()
	id, legID := c.requestIDs(ctx, req.GetRequestId())
	defer c.inFlight.Add(id, legID)()
	_ = stream.SetHeader(metadata.Pairs(headerRequestID, id))
	in := req.GetOpenai()
	if in == nil {
		return c.generateTokensStream(id, legID, req.GetTokens(), stream)
	}
	rc, turn, err := c.requestContext(ctx, id, legID, in)
	if err != nil {
		return err
	}
	if !rc.Stream {
		return status.Errorf(codes.InvalidArgument, `GenerateStream needs "stream": true in the body (request_id: %s)`, id)
	}
	if cont, err := c.relayContinuation(ctx, id, rc); err != nil || cont != nil {
		if err != nil {
			return err
		}
		return c.relayStreamContinued(ctx, id, legID, rc, cont, stream)
	}
	rc.Sink = turn.Sink(newStreamSink(stream))
	err = c.run(ctx, rc, "GenerateStream")
	turn.Finish(ctx, c.log, id)
	return err
}

// run executes the pipeline for one call: it traces the request (honouring
// an inbound traceparent), reports legs, steps and the first byte to the
// metrics, gives the client the step timings (Server-Timing), logs the
// request once with them, and maps its error.
func (c *Coordinator) run(ctx context.Context, rc *steps.RequestContext, method string) error {
	start := time.Now()
	api := apiOf(ctx)
	if api == metrics.APIGRPC { // the REST front counts its requests itself
		defer c.metrics.Begin(api, rc.Stream)()
	}
	ctx, span := tracing.StartRequestSpan(ctx, method, rc)
	ctx = gateway.WithObserver(ctx, c.metrics)
	answer := &answerSink{Sink: rc.Sink, ctx: ctx, metrics: c.metrics, api: api, rc: rc, start: start,
		interToken: c.metrics.InterToken(api, rc.Format.String()), fleet: c.fleetVersion, version: c.fleetVersion.Get()}
	rc.Timings = answer.timings[:0]
	rc.Sink = answer

	return c.finish(ctx, rc, answer, span, refuse(rc, c.pipeline.Run(ctx, rc)))
}

// finish reports a request that ran (err: how it ended) and returns its
// outcome for the client. (Apart from run, whose frame stays small: an
// open stream's goroutine holds the deepest stack it took.)
func (c *Coordinator) finish(ctx context.Context, rc *steps.RequestContext, answer *answerSink, span tracing.RequestSpan, err error) error {
	api, start := answer.api, answer.start
	c.metrics.Steps(rc.Timings)
	c.reportAnswer(api, rc, err)
	c.reportPrefill(ctx, rc, err)
	code := codes.OK
	if err == nil {
		if !rc.Stream {
			setServerTiming(ctx, rc.Timings)
		}
		c.logDone(ctx, slog.LevelInfo, "request done", api, rc, start, span, nil)
	} else {
		st, msg, level := failure(ctx, err, rc.RequestID)
		code = st.Code()
		c.logDone(ctx, level, msg, api, rc, start, span, []slog.Attr{slog.String("code", code.String()), slog.String("error", err.Error())})
		span.Fail(code, st.Message())
		setAnswerHeader(ctx, relayedHeader(err), rc, answer.versions())
		err = st.Err()
	}
	span.Finish(code)
	if api == metrics.APIGRPC {
		c.metrics.RequestDone(api, rc.Format.String(), code.String(), time.Since(start))
		c.metrics.Bytes(api, "in", len(rc.Body))
		c.metrics.Bytes(api, "out", answer.bytes)
	}
	return err
}

// apiOf is the API a call on ctx arrived by: REST for the REST front's
// calls in process, else gRPC.
func apiOf(ctx context.Context) string {
	if frontdoor.Of(ctx) == frontdoor.REST {
		return metrics.APIREST
	}
	return metrics.APIGRPC
}

// logDone writes the request's last line at level, if that level is
// logged (the attributes cost allocations): its id, API, endpoint, model,
// duration, step timings, the id its legs carried when another, and trace
// id, then more.
func (c *Coordinator) logDone(ctx context.Context, level slog.Level, msg, api string, rc *steps.RequestContext, start time.Time, span tracing.RequestSpan, more []slog.Attr) {
	if !c.log.Enabled(ctx, level) {
		return
	}
	attrs := []slog.Attr{
		slog.String("request_id", rc.RequestID),
		slog.String("api", api),
		slog.String("endpoint", rc.Format.String()),
		slog.String("model", rc.Model),
		slog.Bool("stream", rc.Stream),
		slog.Duration("duration", time.Since(start)),
		slog.Any("steps", timingsValue(rc.Timings)),
	}
	if rc.LegID() != rc.RequestID { // what the workers' logs name it by (compat D25)
		attrs = append(attrs, slog.String("leg_request_id", rc.LegID()))
	}
	if sc := span.SpanContext(); sc.IsValid() {
		attrs = append(attrs, slog.String("trace_id", sc.TraceID().String()))
	}
	c.log.LogAttrs(ctx, level, msg, append(attrs, more...)...)
}

// failure is how a failed request is answered and logged: its status,
// the log message and its level. A request the shutdown drain cut is
// UNAVAILABLE "server shutting down", whatever its steps made of their
// cancelled legs, logged at info (every deploy ends some); one the client
// is to blame for or left (a 4xx answer, 499) is logged at info too, the
// rest at warning.
func failure(ctx context.Context, err error, requestID string) (*status.Status, string, slog.Level) {
	if admission.CutByShutdown(ctx) {
		return status.New(codes.Unavailable, admission.ErrShuttingDown.Error()+" (request_id: "+requestID+")"), "request cut short by the shutdown", slog.LevelInfo
	}
	st := apierror.FromError(err, requestID)
	if apierror.HTTPStatus(st) < http.StatusInternalServerError {
		return st, "request failed", slog.LevelInfo
	}
	return st, "request failed", slog.LevelWarn
}

const headerRequestID = "x-request-id"

// requestIDs are the request's id, on the answer and in the logs
// (requestID), and the id its legs carry (compat D25): a client's id made
// unique (headers.LegRequestID) unless server.client_request_id_on_legs is
// on; a fresh one, made here or by the REST front (headers.WithMintedRequestID),
// is unique already and goes as it is.
func (c *Coordinator) requestIDs(ctx context.Context, fromMessage string) (id, legID string) {
	id, minted := settleRequestID(ctx, fromMessage)
	if minted || c.clientIDOnLegs || headers.MintedRequestID(ctx) {
		return id, id
	}
	return id, headers.LegRequestID(id)
}

// requestID is the request's id: the message's, else a valid x-request-id
// metadata value, else a fresh one.
func requestID(ctx context.Context, fromMessage string) string {
	id, _ := settleRequestID(ctx, fromMessage)
	return id
}

// settleRequestID is requestID, and whether it made the id (no valid one
// came).
func settleRequestID(ctx context.Context, fromMessage string) (id string, minted bool) {
	if fromMessage != "" {
		return fromMessage, false // validated by the request's protovalidate rules
	}
	var v string
	if vs := metadata.ValueFromIncomingContext(ctx, headerRequestID); len(vs) > 0 {
		v = vs[0]
	}
	id = headers.RequestIDOrNew(v)
	return id, id != v
}

// newRequestContext parses the body into the request's document within
// lim, unless the REST front did (WithParsedBody), reads what the service
// needs from it (top-level "model" and "stream") and the forwarded
// headers from the call metadata. With begin (responses stored), a
// Responses body's "store" and "previous_response_id" are begin's to read
// (it may return the document rebuilt) before every leg is made to say
// "store": false.
func newRequestContext(ctx context.Context, id string, in *coordinatorv1.OpenAIRequest, lim requestbody.Limits, begin beginTurn) (*steps.RequestContext, error) {
	format := FormatOf(in.GetEndpoint())
	doc := frontdoor.ParsedBody(ctx, in.GetJson(), format)
	if doc == nil {
		var err error
		if doc, err = requestbody.ParseLimited(in.GetJson(), format, lim); err != nil {
			return nil, invalidBody(err, id)
		}
	}
	// Another parser reads the body after us: a repeated key could mean one
	// thing to the coordinator and another to a worker.
	if key, dup := doc.Root().DuplicateKey(); dup {
		return nil, status.Errorf(codes.InvalidArgument, "invalid JSON body: duplicate key %q (request_id: %s)", key, id)
	}
	body := in.GetJson()
	doc, body, err := checked(doc, body, begin, id)
	if err != nil {
		return nil, err
	}
	doc.Unstored() // a Responses leg says "store": false
	rc := &steps.RequestContext{
		RequestID: id,
		Format:    format,
		Body:      body,
		Doc:       doc,
	}
	if raw, ok := doc.Root().Get(bodykeys.Model); ok {
		rc.Model, _ = jsonbody.String(raw)
	}
	stream, err := doc.Stream()
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "%v (request_id: %s)", err, id)
	}
	rc.Stream = stream
	doc.SpellStream(stream) // a worker reads it as decided
	return rc, nil
}

// invalidBody is InvalidArgument for a body that does not parse; past a
// limit on its structure, with an ErrorInfo naming the limit's key and
// value.
func invalidBody(err error, id string) error {
	st := status.Newf(codes.InvalidArgument, "invalid JSON body: %v (request_id: %s)", err, id)
	var le *jsonbody.LimitError
	if errors.As(err, &le) {
		info := &errdetails.ErrorInfo{Reason: "BODY_LIMIT", Domain: "coordinator",
			Metadata: map[string]string{"limit": le.Key, "max": strconv.Itoa(le.Max), "what": le.What}}
		if d, derr := st.WithDetails(info); derr == nil {
			st = d
		}
	}
	return st.Err()
}

// FormatOf is the pipeline format of an OpenAI endpoint.
func FormatOf(e coordinatorv1.Endpoint) legs.Format {
	switch e {
	case coordinatorv1.Endpoint_ENDPOINT_CHAT_COMPLETIONS:
		return legs.FormatChat
	case coordinatorv1.Endpoint_ENDPOINT_COMPLETIONS:
		return legs.FormatCompletions
	case coordinatorv1.Endpoint_ENDPOINT_RESPONSES:
		return legs.FormatResponses
	case coordinatorv1.Endpoint_ENDPOINT_MESSAGES:
		return legs.FormatMessages
	default:
		return legs.FormatGenerate
	}
}

var _ coordinatorv1.CoordinatorServiceServer = (*Coordinator)(nil)
