// Package gateway is the HTTP client of the coordinator's outbound legs:
// the Inference Gateway (encode, prefill and decode workers, chosen by the
// EPP-Profile header) and the render service. Beside the client: its
// HTTP/1.1 transport for plain-http addresses (h1_*.go), the passthrough
// forwarder (forward.go), retries (retry.go) and the idle-answer guard
// (idle.go).
package gateway

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/coordinator-project/coordinator/internal/headers"
	"github.com/coordinator-project/coordinator/internal/spans"
)

// Profiles: the EPP scheduling profile a gateway leg asks for.
const (
	ProfileEncode  = "encode"
	ProfilePrefill = "prefill"
	ProfileDecode  = "decode"
)

// Options configure one connection pool.
type Options struct {
	// Address is the base URL; request paths are appended to it verbatim.
	Address string
	// MaxIdleConnsPerHost caps the keep-alive pool.
	MaxIdleConnsPerHost int
	// IdleConnTimeout closes idle keep-alive connections.
	IdleConnTimeout time.Duration
	// ResponseHeaderTimeout bounds the wait for a leg's response headers;
	// a body that keeps streaming is never cut by it.
	ResponseHeaderTimeout time.Duration
	// Timeout, if set, bounds each attempt of a call including the body
	// (render).
	Timeout time.Duration
	// ConnectTimeout bounds opening a connection: the dial and the TLS
	// handshake together. 0 means DefaultConnectTimeout.
	ConnectTimeout time.Duration
	// StreamIdleTimeout, if set, bounds the silence of a 2xx answer's
	// body: a Read that waits that long for data closes the body, and the
	// body's Read returns a *TransportError wrapping ErrStreamIdle (a
	// timeout). A body that keeps sending, however slowly, is never cut;
	// the time the caller spends between Reads does not count. 0: no bound.
	StreamIdleTimeout time.Duration
	// Retry is the policy of the legs whose Request.Retry is set; the zero
	// value sends every leg once.
	Retry Retry
	// MaxAnswerBytes caps a buffered (not streamed) decode answer
	// (gateway.max_answer_size): the decode steps read up to it. 0 means
	// DefaultMaxAnswerBytes.
	MaxAnswerBytes int64
	// Log, if set, gets one line per leg at trace level with the redacted
	// headers and body (see RedactBody); nothing is logged above trace.
	Log *slog.Logger
	// Transport picks the pool of a plain-http address: TransportH1 (""
	// too) or TransportNetHTTP. An https address always gets net/http's.
	Transport string
	// TLS, if set, gives the TLS config of each new connection to an https
	// address. It is called once per dial and its result is not kept, so
	// certificates and CAs reloaded from disk (see tlsfiles.Client) apply
	// from the next connection on. The client fills in an empty ServerName
	// with the address's host and offers h2 and http/1.1 by ALPN. Nil: Go's
	// defaults (the system's CAs, no client certificate).
	TLS func() *tls.Config
	// UserAgent is every leg's User-Agent when the client sent none (a
	// leg carries the client's own); "" means DefaultUserAgent.
	UserAgent string
}

// Client posts legs to one base URL over one keep-alive pool. It ignores
// HTTP(S)_PROXY by design: legs stay inside the cluster. It hands each leg
// straight to the pool's RoundTrip, without http.Client: a leg answered
// with a redirect fails with that status (as the reference's decode proxy
// relays it) rather than being sent on, and the client spares the header
// copies and the stack of http.Client's redirect loop (an open stream's
// goroutine holds the deepest stack its leg took). Safe for concurrent
// use.
type Client struct {
	base    string
	pool    pool
	log     *slog.Logger
	idle    time.Duration
	timeout time.Duration
	retry   Retry
	// userAgent is Options.UserAgent as a header value, shared by the
	// legs (net/http never writes into a header's values).
	userAgent []string
	// maxAnswer is Options.MaxAnswerBytes, defaulted.
	maxAnswer int64
	// jitter and sleep are the retry loop's randomness and clock; tests
	// replace them (export_test.go).
	jitter func(n int64) int64
	sleep  func(ctx context.Context, d time.Duration) error
}

// DefaultUserAgent is the User-Agent of the legs of a client that sent
// none, unless Options.UserAgent says otherwise.
const DefaultUserAgent = "coordinator"

// DefaultMaxAnswerBytes is MaxAnswerBytes when unset: 256 MiB, the most a
// legitimate non-streamed answer holds with room to spare (n × top_logprobs
// × max_tokens, or prompt_logprobs over a long prompt, take tens of MiB).
const DefaultMaxAnswerBytes = 256 << 20

// DefaultConnectTimeout bounds the dial and TLS handshake of a client whose
// Options.ConnectTimeout is 0.
const DefaultConnectTimeout = 10 * time.Second

// New builds a client; Address must be an absolute http(s) URL.
func New(o Options) (*Client, error) {
	u, err := url.Parse(o.Address)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("upstream: address must be an http(s) URL with a host, got %q", o.Address)
	}
	if err := validTransport(o.Transport); err != nil {
		return nil, err
	}
	connect := o.ConnectTimeout
	if connect <= 0 {
		connect = DefaultConnectTimeout
	}
	dialer := &net.Dialer{
		Timeout:   connect,
		KeepAlive: 30 * time.Second,
	}
	return &Client{
		base:      strings.TrimSuffix(o.Address, "/"),
		pool:      newTransport(u.Scheme, dialer, o),
		log:       o.Log,
		idle:      o.StreamIdleTimeout,
		timeout:   o.Timeout,
		retry:     o.Retry,
		userAgent: []string{cmp.Or(o.UserAgent, DefaultUserAgent)},
		maxAnswer: cmp.Or(max(o.MaxAnswerBytes, 0), DefaultMaxAnswerBytes),
		jitter:    rand.Int64N,
		sleep:     sleepCtx,
	}, nil
}

// MaxAnswer is the cap on a buffered decode answer, in bytes
// (Options.MaxAnswerBytes).
// A nil client has the default.
func (c *Client) MaxAnswer() int64 {
	if c == nil {
		return DefaultMaxAnswerBytes
	}
	return c.maxAnswer
}

// Close releases idle connections.
func (c *Client) Close() { c.pool.CloseIdleConnections() }

// Request is one outbound leg.
type Request struct {
	// Leg names the leg in errors and logs: "decode", "prefill", "encode[2]", "render".
	Leg string
	// Path is appended to the client's base URL.
	Path string
	// Profile is the EPP-Profile header value; empty for the render service.
	Profile string
	// RequestID is sent as x-request-id.
	RequestID string
	// Header holds the forwarded client headers (see headers.FromHTTP).
	Header headers.Forwarded
	// Prefer, if set, is sent as the Prefer header.
	Prefer string
	// Body is the JSON body, unless Parts is set.
	Body []byte
	// Parts, when set, is the JSON body instead, as consecutive pieces
	// sent one after the other without being joined (a leg written from
	// the request document refers to the client's unchanged bytes).
	Parts [][]byte
	// Retry marks a leg that is safe to send again (render, encode,
	// prefill): it is retried by the client's Retry policy, and sent once
	// more at once, on a new connection, when the kept connection it went
	// out on dies before any byte of the answer (idempotencyKey). Never
	// set on a decode leg: that one goes again only when nothing of it
	// went out.
	Retry bool
}

// maxErrorBody caps how much of a non-2xx answer is read.
const maxErrorBody = 64 << 10

// Post sends the leg. A 2xx answer is returned with its body unread (the
// caller closes it). Any other status is returned as a *StatusError with
// the body read (up to 64 KiB) and closed. A transport failure is returned
// as a *TransportError; when ctx ended it is ctx's error, wrapped with the
// leg's name. The answer body's Read errors follow the same rule (see
// answerBody); with Options.StreamIdleTimeout a silent body times out.
//
// A leg with Request.Retry is sent again by the client's Retry policy (see
// Retry); the answer or error of the last attempt is returned.
//
// The leg is traced as a span of ctx's whose context travels in the
// traceparent header (when tracing is on; otherwise the client's own
// traceparent, if any, is forwarded as it came), and each attempt is
// reported to ctx's Observer.
func (c *Client) Post(ctx context.Context, r Request) (*http.Response, error) {
	phase := phaseOf(r)
	ctx, span := startLeg(ctx, r.Leg, phase, r.RequestID)
	resp, attempts, err := c.send(ctx, &r, phase, span)
	if !span.IsRecording() {
		return resp, err
	}
	return recordLeg(span, r.Prefer != "", attempts, resp, err)
}

// recordLeg records the outcome of a leg (conditional: it sent Prefer)
// on its recording span and passes it on.
func recordLeg(span trace.Span, conditional bool, attempts int, resp *http.Response, err error) (*http.Response, error) {
	if attempts > 1 {
		span.SetAttributes(attribute.Int("coordinator.attempts", attempts))
	}
	if conditional && statusOf(resp, err) == http.StatusPreconditionFailed {
		// The answer a conditional leg asked for (conditional-decode's
		// cache miss): recorded, not an error.
		span.SetAttributes(attribute.Int("http.response.status_code", http.StatusPreconditionFailed))
		span.End()
		return nil, err
	}
	return endLeg(span, resp, err)
}

// startLeg starts a leg's client span. With tracing off (spans.On) it
// starts none: the leg gets ctx's own no-op span, and costs nothing.
func startLeg(ctx context.Context, leg, phase, requestID string) (context.Context, trace.Span) {
	if !spans.On() {
		return ctx, trace.SpanFromContext(ctx)
	}
	return tracer.Start(ctx, "leg "+leg, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("coordinator.phase", phase), attribute.String("coordinator.request_id", requestID)))
}

// endLeg records a leg's outcome on its recording span and passes it on:
// the span ends now without an answer, or when the answer's body is closed
// (a streamed decode leg's span covers the whole stream).
func endLeg(span trace.Span, resp *http.Response, err error) (*http.Response, error) {
	if !span.IsRecording() {
		return resp, err
	}
	span.SetAttributes(attribute.Int("http.response.status_code", statusOf(resp, err)))
	if err != nil {
		span.SetStatus(otelcodes.Error, err.Error())
	}
	if resp == nil {
		span.End()
		return nil, err
	}
	resp.Body = &spanBody{ReadCloser: resp.Body, span: span}
	return resp, nil
}

// statusOf is the HTTP status of an attempt's outcome; 0 when none came.
func statusOf(resp *http.Response, err error) int {
	if resp != nil {
		return resp.StatusCode
	}
	return errStatus(err)
}

// errStatus is the status of a *StatusError in err; 0 for none. (Apart
// from statusOf so that an answered leg does not allocate the target.)
func errStatus(err error) int {
	var se *StatusError
	if errors.As(err, &se) {
		return se.StatusCode
	}
	return 0
}

// report tells ctx's Observer how one attempt of leg went.
func report(ctx context.Context, leg, phase string, attempt int, start time.Time, resp *http.Response, err error) {
	if o := observerFrom(ctx); o != nil {
		o.LegDone(LegResult{Leg: leg, Phase: phase, StatusCode: statusOf(resp, err), Duration: time.Since(start), Attempt: attempt})
	}
}

// post is one attempt.
func (c *Client) post(ctx context.Context, r *Request, span trace.Span) (*http.Response, error) {
	legCtx, cancel := ctx, context.CancelFunc(nil)
	if c.timeout > 0 {
		legCtx, cancel = context.WithTimeoutCause(ctx, c.timeout, errAttemptTimeout)
	}
	resp, err := c.do(ctx, legCtx, r, span)
	if err != nil {
		if cancel != nil {
			cancel()
		}
		return nil, err
	}
	resp.Body = newAnswerBody(ctx, resp.Body, r.Leg, c.idle, cancel)
	return resp, nil
}

// do sends one attempt on legCtx (ctx, or a child of it bounded by
// Options.Timeout) and returns a 2xx answer as it came.
func (c *Client) do(ctx, legCtx context.Context, r *Request, span trace.Span) (*http.Response, error) {
	req, err := c.newRequest(ctx, legCtx, r, span)
	if err != nil {
		return nil, err
	}
	resp, err := c.roundTrip(ctx, r.Leg, req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, statusError(r.Leg, resp)
	}
	// Nothing reads the request from its answer, and a streamed answer
	// would keep it (its header, URL and body reader, about 1 KB) for as
	// long as the stream lasts.
	resp.Request = nil
	return resp, nil
}

// newRequest is the HTTP request of an attempt of r, on legCtx.
func (c *Client) newRequest(ctx, legCtx context.Context, r *Request, span trace.Span) (*http.Request, error) {
	req, err := http.NewRequestWithContext(legCtx, http.MethodPost, c.base+r.Path, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", r.Leg, err)
	}
	setBody(req, r)
	h := req.Header
	r.Header.WriteTo(h)
	c.setUserAgent(h)
	h["Content-Type"] = jsonContentType
	h["X-Request-Id"] = []string{r.RequestID}
	if r.Profile != "" {
		h["Epp-Profile"] = profileValue(r.Profile)
	}
	if r.Prefer != "" {
		h["Prefer"] = []string{r.Prefer}
	}
	if r.Retry {
		h[idempotencyKey] = nil
	}
	injectTrace(ctx, span, h)
	if c.log != nil && c.log.Enabled(ctx, levelTrace) {
		c.logLeg(ctx, r, req)
	}
	return req, nil
}

// setUserAgent gives a leg's header, the client's headers written in, the
// client's User-Agent under its canonical name (net/http would send its
// own beside a lowercase one), else the configured one.
func (c *Client) setUserAgent(h http.Header) {
	//lint:ignore SA1008 headers.Forwarded writes lowercase names
	ua, ok := h["user-agent"]
	if !ok || len(ua) == 0 || ua[0] == "" {
		ua = c.userAgent
	}
	delete(h, "user-agent")
	h["User-Agent"] = ua
}

// logLeg writes the trace log line of a leg going out.
func (c *Client) logLeg(ctx context.Context, r *Request, req *http.Request) {
	c.log.Log(ctx, levelTrace, "leg request", "leg", r.Leg, "request_id", r.RequestID, "url", req.URL.String(),
		"headers", RedactHeaders(req.Header), "body", RedactBody(r.body()))
}

// statusError reads (up to maxErrorBody) and closes a non-2xx answer of
// leg and returns it as a *StatusError. (Apart from do, whose frame stays
// small: an open stream's goroutine holds the deepest stack it took, and
// the leg's round trip is its deepest.)
func statusError(leg string, resp *http.Response) error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	resp.Body.Close()
	return &StatusError{
		Leg:         leg,
		StatusCode:  resp.StatusCode,
		ContentType: resp.Header.Get("Content-Type"),
		Header:      resp.Header,
		Body:        body,
	}
}

// idempotencyKey marks, with a nil value, a leg safe to send twice
// (Request.Retry) to the pool: when the kept connection it went out on
// dies before any byte of the answer, h1's Transport and net/http's send it
// once more on a new connection (net/http's documented rule). The nil
// value writes no header line: no worker sees it.
const idempotencyKey = "Idempotency-Key"

// jsonContentType is every leg's Content-Type value. Legs share it, and
// profileValue's, to spare each leg the allocations: net/http and the
// header's readers never write into a header's values (Set replaces the
// slice, Add appends to a copy: the length is the capacity).
var jsonContentType = []string{"application/json"}

// profileValues are the EPP-Profile header values of the three profiles.
var profileValues = map[string][]string{
	ProfileEncode:  {ProfileEncode},
	ProfilePrefill: {ProfilePrefill},
	ProfileDecode:  {ProfileDecode},
}

// profileValue is the EPP-Profile header value of profile: a shared one
// for the three profiles, a new one for any other.
func profileValue(profile string) []string {
	if v, ok := profileValues[profile]; ok {
		return v
	}
	return []string{profile}
}

// setBody gives req the body of r, with its length and a way to have it
// again: net/http's transport sends a leg again on a new connection when
// the kept one it chose turns out closed, and h1 tells a body it can have
// again from a stream whose own read errors are the leg's. Parts go as
// net.Buffers, which h1 writes with the header in one writev; one slice as
// a bytes.Reader, which net/http's writer buffers with the header.
func setBody(req *http.Request, r *Request) {
	if body, all := r.Body, r.Parts; all == nil {
		req.Body, req.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	} else {
		parts := func() io.ReadCloser { bufs := net.Buffers(slices.Clone(all)); return io.NopCloser(&bufs) }
		for _, p := range all {
			req.ContentLength += int64(len(p))
		}
		req.Body, req.GetBody = parts(), func() (io.ReadCloser, error) { return parts(), nil }
	}
	if req.ContentLength == 0 {
		req.Body, req.GetBody = http.NoBody, func() (io.ReadCloser, error) { return http.NoBody, nil }
	}
}

// body is the request's body in one slice (for the trace log).
func (r *Request) body() []byte {
	if r.Parts == nil {
		return r.Body
	}
	return bytes.Join(r.Parts, nil)
}

// roundTrip sends req, a leg of ctx's: a failure is ctx's cause when ctx
// ended (the caller's cancellation), a *TransportError otherwise, of the
// leg's own cause when its context ended (Options.Timeout).
//
// An answer whose status is outside 100-599 is no HTTP answer: its body is
// closed and the leg fails with a *TransportError wrapping
// ErrInvalidStatus (a 502 to the client), on every leg, the relayed ones
// included.
func (c *Client) roundTrip(ctx context.Context, leg string, req *http.Request) (*http.Response, error) {
	resp, err := c.pool.RoundTrip(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%s: %w", leg, context.Cause(ctx))
		}
		if cause := context.Cause(req.Context()); cause != nil {
			err = cause
		}
		return nil, &TransportError{Leg: leg, Err: err}
	}
	if resp.StatusCode < 100 || resp.StatusCode > 599 {
		resp.Body.Close()
		return nil, &TransportError{Leg: leg, Err: fmt.Errorf("%w: %d", ErrInvalidStatus, resp.StatusCode)}
	}
	return resp, nil
}

// ErrInvalidStatus is the failure of a leg answered with a status outside
// 100-599 (http.ReadResponse takes any three digits): the worker is not
// speaking HTTP, and its answer is never relayed.
var ErrInvalidStatus = errors.New("answer status outside 100-599")

// injectTrace puts the leg span's context in h when tracing is on,
// replacing the client's forwarded traceparent, tracestate and baggage
// (kept under lowercase keys, which the propagator's canonical ones would
// otherwise sit beside: two traceparent lines on the wire).
func injectTrace(ctx context.Context, span trace.Span, h http.Header) {
	if !span.SpanContext().IsValid() {
		return
	}
	p := otel.GetTextMapPropagator()
	for _, f := range p.Fields() {
		delete(h, strings.ToLower(f))
		h.Del(f)
	}
	p.Inject(ctx, propagation.HeaderCarrier(h))
}

// levelTrace is log_level 5, the only level at which legs are logged.
const levelTrace = slog.Level(-8)

// tracer makes the leg spans; a no-op until the app installs a tracer
// provider (tracing is off by default).
var tracer = otel.Tracer("github.com/coordinator-project/coordinator/internal/gateway")

// spanBody ends the leg's span when the caller closes the answer's body,
// so a streamed decode leg's span covers the whole stream.
type spanBody struct {
	io.ReadCloser
	span trace.Span
	once sync.Once
}

func (b *spanBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(func() { b.span.End() })
	return err
}

// StatusError is a leg answered with a non-2xx status.
type StatusError struct {
	Leg         string
	StatusCode  int
	ContentType string
	// Header is the answer's header, as it came: the client gets what the
	// header policy lets through when Relay is set.
	Header http.Header
	// Body is the start of the answer's body: logged, and relayed to the
	// client only when Relay is set.
	Body []byte
	// Relay marks answers the client gets verbatim (the decode legs).
	Relay bool
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("%s: upstream answered HTTP %d", e.Leg, e.StatusCode)
}

// TransportError is a leg that got no answer (refused, reset, timed out,
// not HTTP), or whose 2xx answer's body broke off (InBody).
type TransportError struct {
	Leg string
	Err error
	// InBody marks a failure while reading the answer's body, after its
	// headers arrived.
	InBody bool
}

func (e *TransportError) Error() string { return fmt.Sprintf("%s: %v", e.Leg, e.Err) }
func (e *TransportError) Unwrap() error { return e.Err }

// Timeout reports whether the leg timed out: connecting, waiting for
// headers, or waiting for the body's next bytes (ErrStreamIdle).
func (e *TransportError) Timeout() bool {
	var ne net.Error
	return errors.As(e.Err, &ne) && ne.Timeout()
}
