package rest

import (
	"net"
	"net/http"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/coordinator-project/coordinator/internal/spans"
)

// tracer makes the REST front's server spans; a no-op until tracing is on.
var tracer = otel.Tracer("github.com/coordinator-project/coordinator/service/rest")

// untraced are the paths probes and scrapers poll: no span each.
var untraced = map[string]bool{"/healthz": true, "/readyz": true, "/metrics": true}

// traced gives every request a server span by the OpenTelemetry HTTP
// conventions, a child of the client's traceparent if any: named
// "METHOD route" ("POST /v1/chat/completions"; the method alone for a
// relayed path, which no route names), with http.request.method,
// url.path, url.scheme, http.route, http.response.status_code,
// network.protocol.version, server.address and port, client.address and
// user_agent.original. Only 5xx statuses (and answers cut off) are
// errors. The pipeline's step spans and the legs' client spans, a relayed
// request's included, hang off it. With tracing off (spans.On) the request
// costs nothing; one not sampled costs one context and nothing more.
func traced(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if untraced[r.URL.Path] || !spans.On() {
			next.ServeHTTP(w, r)
			return
		}
		ctx := otel.GetTextMapPropagator().Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		method := spanMethod(r.Method)
		ctx, span := tracer.Start(ctx, method, trace.WithSpanKind(trace.SpanKindServer))
		r = r.WithContext(ctx)
		if !span.IsRecording() {
			next.ServeHTTP(w, r)
			return
		}
		span.SetAttributes(requestAttributes(r, method)...)
		sw := &statusWriter{ResponseWriter: w}
		defer func() {
			p := recover()
			endServerSpan(span, r, method, sw.code, p != nil)
			if p != nil {
				panic(p)
			}
		}()
		next.ServeHTTP(sw, r)
	})
}

// spanMethod is the method as the conventions name it: one of HTTP's, or
// "_OTHER" for anything a client invented.
func spanMethod(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions, http.MethodConnect, http.MethodTrace:
		return m
	}
	return "_OTHER"
}

func requestAttributes(r *http.Request, method string) []attribute.KeyValue {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	attrs := []attribute.KeyValue{
		semconv.HTTPRequestMethodKey.String(method),
		semconv.URLPath(r.URL.Path),
		semconv.URLScheme(scheme),
		semconv.NetworkProtocolVersion(strconv.Itoa(r.ProtoMajor) + "." + strconv.Itoa(r.ProtoMinor)),
	}
	if method == "_OTHER" {
		attrs = append(attrs, semconv.HTTPRequestMethodOriginal(r.Method))
	}
	if host, port, err := net.SplitHostPort(r.Host); err == nil {
		attrs = append(attrs, semconv.ServerAddress(host))
		if n, err := strconv.Atoi(port); err == nil {
			attrs = append(attrs, semconv.ServerPort(n))
		}
	} else if r.Host != "" {
		attrs = append(attrs, semconv.ServerAddress(r.Host))
	}
	if ip, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		attrs = append(attrs, semconv.ClientAddress(ip))
	}
	if ua := r.UserAgent(); ua != "" {
		attrs = append(attrs, semconv.UserAgentOriginal(ua))
	}
	return attrs
}

// endServerSpan names the span after the route the mux matched (it sets
// r.Pattern), records the status and ends it.
func endServerSpan(span trace.Span, r *http.Request, method string, code int, aborted bool) {
	if route := routeOf(r.Pattern); route != "" {
		span.SetName(method + " " + route)
		span.SetAttributes(semconv.HTTPRoute(route))
	}
	if code == 0 && !aborted {
		code = http.StatusOK // nothing written: net/http sends 200
	}
	if code != 0 {
		span.SetAttributes(semconv.HTTPResponseStatusCode(code))
	}
	switch {
	case aborted:
		span.SetAttributes(semconv.ErrorTypeKey.String("aborted"))
		span.SetStatus(codes.Error, "answer cut off")
	case code >= 500:
		span.SetAttributes(semconv.ErrorTypeKey.String(strconv.Itoa(code)))
		span.SetStatus(codes.Error, http.StatusText(code))
	}
	span.End()
}

// routeOf is the path of a ServeMux pattern ("POST /v1/completions" →
// "/v1/completions"); "" for the catch-all "/", which relays any path.
func routeOf(pattern string) string {
	if i := strings.IndexByte(pattern, ' '); i >= 0 {
		pattern = pattern[i+1:]
	}
	if pattern == "/" {
		return ""
	}
	return pattern
}

// statusWriter notes the status written through it.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (s *statusWriter) WriteHeader(code int) {
	if s.code == 0 && code >= 200 {
		s.code = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	if s.code == 0 {
		s.code = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController and capBody reach the connection.
func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }
