package gateway

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/coordinator-project/coordinator/internal/headers"
)

// LegPassthrough names the leg of a request relayed to the gateway as it
// came (a path the coordinator does not serve, compat §3.6).
const LegPassthrough = "passthrough"

// ForwardRequest is a client request relayed to the gateway's decode
// profile as it came: same method, target, body and (forwardable) headers.
type ForwardRequest struct {
	// Method is the client's method.
	Method string
	// Target is the escaped path, then "?" and the raw query if any; it is
	// appended to the client's base URL and must start with "/".
	Target string
	// RequestID is sent as x-request-id.
	RequestID string
	// Header is what the leg carries of the client's headers
	// (headers.Passthrough); see Forward for what is added.
	Header headers.Forwarded
	// Body is the client's body, read as it is sent; nil for none.
	Body io.Reader
	// ContentLength is the body's length; -1 when unknown (sent chunked).
	ContentLength int64
}

// Forward relays r to the gateway with EPP-Profile: decode. It sends
// r.Header, the client's User-Agent under its canonical name (else the
// configured one), the request id and the profile. The answer comes back whatever its status, body unread
// (the caller closes it), its hop-by-hop headers removed; its body's Read
// errors and Options.StreamIdleTimeout are as for Post. A transport failure
// is a *TransportError; when ctx ended it is ctx's error, wrapped.
//
// The leg is reported to ctx's Observer with phase "decode" and traced as a
// span of ctx's, like Post's legs.
func (c *Client) Forward(ctx context.Context, r ForwardRequest) (*http.Response, error) {
	start := time.Now()
	ctx, span := startLeg(ctx, LegPassthrough, ProfileDecode, r.RequestID)
	resp, err := c.forward(ctx, r, span)
	report(ctx, LegPassthrough, ProfileDecode, 1, start, resp, err)
	return endLeg(span, resp, err)
}

func (c *Client) forward(ctx context.Context, r ForwardRequest, span trace.Span) (*http.Response, error) {
	if !strings.HasPrefix(r.Target, "/") {
		return nil, fmt.Errorf("%s: target %q is not a path", LegPassthrough, r.Target)
	}
	legCtx, cancel := context.WithCancel(ctx) // ended by the answer's Close, a request body still streaming included
	req, err := http.NewRequestWithContext(legCtx, r.Method, c.base+r.Target, r.Body)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("%s: %w", LegPassthrough, err)
	}
	if r.Body != nil {
		req.ContentLength = max(r.ContentLength, 0) // 0 with a body: unknown, chunked
	}
	req.Header = c.forwardHeader(r.Header, r.RequestID)
	injectTrace(ctx, span, req.Header)
	if c.log != nil && c.log.Enabled(ctx, levelTrace) {
		c.log.Log(ctx, levelTrace, "leg request", "leg", LegPassthrough, "request_id", r.RequestID, "method", r.Method,
			"url", req.URL.String(), "headers", RedactHeaders(req.Header))
	}
	resp, err := c.roundTrip(ctx, LegPassthrough, req)
	if err != nil {
		cancel()
		return nil, err
	}
	headers.DropHopByHop(resp.Header)
	resp.Body = newAnswerBody(ctx, resp.Body, LegPassthrough, c.idle, cancel)
	return resp, nil
}

// forwardHeader is the header of a passthrough request.
func (c *Client) forwardHeader(in headers.Forwarded, requestID string) http.Header {
	h := make(http.Header, in.Len()+3)
	in.WriteTo(h)
	c.setUserAgent(h)
	h["X-Request-Id"] = []string{requestID}
	h["Epp-Profile"] = []string{ProfileDecode}
	return h
}
