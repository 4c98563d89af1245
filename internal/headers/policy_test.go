package headers_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"google.golang.org/grpc/metadata"

	"github.com/coordinator-project/coordinator/internal/headers"
)

// TestPolicy is the header policy at every boundary, one row per client
// header: whether it reaches the legs (all legs carry the same headers:
// render, encode, prefill, conditional-decode, decode) from a REST client
// (FromHTTP), from a REST client through the in-process gRPC call
// (MetadataKey, then FromMetadata), from a gRPC client (FromMetadata), and
// on the passthrough of an unregistered path (Passthrough).
func TestPolicy(t *testing.T) {
	t.Parallel()
	type reach struct{ rest, restViaGRPC, grpc, passthrough bool }
	all := reach{true, true, true, true}
	none := reach{}
	tests := map[string]reach{
		"X-Custom":                    all,
		"Traceparent":                 all,
		"X-Llm-D-Slo-Ttft-Ms":         all,
		"X-Coordinator":               all, // no dash after: not reserved
		"X-Coordinatorx":              all,
		"Cookie":                      all,
		"Authorization":               {rest: true, restViaGRPC: false, grpc: true, passthrough: true},  // grpc-gateway forwards it itself
		"User-Agent":                  {rest: true, restViaGRPC: false, grpc: false, passthrough: true}, // gRPC's own on a call
		"Content-Type":                {passthrough: true},
		"Epp-Profile":                 none,
		"Prefer":                      none,
		"X-Request-Id":                none,
		"Accept-Encoding":             none,
		"Host":                        none,
		"Content-Length":              none,
		"Expect":                      none,
		"Connection":                  none,
		"Keep-Alive":                  none,
		"Proxy-Authorization":         none,
		"Proxy-Authenticate":          none,
		"Proxy-Connection":            none,
		"Te":                          none,
		"Trailer":                     none,
		"Transfer-Encoding":           none,
		"Upgrade":                     none,
		"X-Coordinator-Phase":         none,
		"x-coordinator-":              none,
		"Grpc-Timeout":                {rest: true, restViaGRPC: false, grpc: false, passthrough: true},
		"Grpc-Anything":               {rest: true, restViaGRPC: false, grpc: false, passthrough: true},
		"X-Trace-Bin":                 {rest: true, restViaGRPC: false, grpc: false, passthrough: true},
		"Grpc-Accept-Encoding":        {rest: true, restViaGRPC: false, grpc: false, passthrough: true},
		"X-Llm-D-Inference-Objective": all,
	}
	for name, want := range tests {
		in := http.Header{http.CanonicalHeaderKey(name): {"v"}}
		lower := http.CanonicalHeaderKey(name)
		_, rest := has(headers.FromHTTP(in), name)
		_, pass := has(headers.Passthrough(in), name)
		md := metadata.MD{}
		if k, ok := headers.MetadataKey(lower); ok {
			assert.Equal(t, k, lowerASCII(name), name)
			md[k] = []string{"v"}
		}
		_, viaGRPC := has(headers.FromMetadata(md), name)
		_, grpc := has(headers.FromMetadata(metadata.MD{lowerASCII(name): {"v"}}), name)
		assert.Equal(t, want, reach{rest, viaGRPC, grpc, pass}, name)
	}
}

func has(f headers.Forwarded, name string) (string, bool) {
	return f.Get(name), f.Has(name)
}

func lowerASCII(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

func TestFromHTTP(t *testing.T) {
	t.Parallel()
	in := http.Header{
		"Authorization": {"Bearer a", "Bearer b"}, "Cookie": {"c=1"}, "X-Custom": {"v"}, "Traceparent": {"00-x"},
		"Connection": {"close"}, "Keep-Alive": {"1"}, "Te": {"trailers"}, "Transfer-Encoding": {"chunked"}, "Upgrade": {"h2c"},
		"Host": {"h"}, "Content-Length": {"3"}, "Content-Type": {"text/plain"}, "Epp-Profile": {"prefill"},
		"Prefer": {"if-available"}, "X-Request-Id": {"r"}, "Accept-Encoding": {"gzip"}, "Empty": {},
	}
	got := headers.FromHTTP(in)
	assert.Equal(t, headers.NewForwarded("authorization", "Bearer a", "cookie", "c=1", "x-custom", "v", "traceparent", "00-x"), got)
	assert.Equal(t, []string{"authorization", "cookie", "traceparent", "x-custom"}, got.Names(), "names lowercased once")
	assert.Equal(t, []string{"Bearer a", "Bearer b"}, in["Authorization"], "the input is not modified")
	assert.False(t, headers.Forwardable("EPP-Profile"))
	assert.True(t, headers.Forwardable("X-Llm-D-Slo-Ttft-Ms"))
}

func TestFromHTTPDropsWhatConnectionNamesAndInternalHeaders(t *testing.T) {
	t.Parallel()
	in := http.Header{
		"Connection":          {"keep-alive, X-Hop-One", " x-hop-two ,"},
		"X-Hop-One":           {"1"},
		"X-Hop-Two":           {"2"},
		"X-Coordinator-Phase": {"prefill"},
		"X-Coordinator":       {"no dash after: not reserved"},
		"Proxy-Connection":    {"keep-alive"},
		"Proxy-Authorization": {"Basic x"},
		"Expect":              {"100-continue"},
		"X-Custom":            {"v"},
	}
	assert.Equal(t, headers.NewForwarded("x-custom", "v", "x-coordinator", "no dash after: not reserved"), headers.FromHTTP(in))
	for name, want := range map[string]bool{"X-Coordinator-Anything": false, "x-coordinator-": false, "Trailer": false, "X-Coordinatorx": true, "X-Hop-One": true} {
		assert.Equal(t, want, headers.Forwardable(name), name)
	}
}

func TestPassthroughCarriesTheClientsContentType(t *testing.T) {
	t.Parallel()
	in := http.Header{"Content-Type": {"text/plain"}, "Connection": {"X-Secret"}, "X-Secret": {"s"}, "Authorization": {"Bearer t"}}
	assert.Equal(t, headers.NewForwarded("content-type", "text/plain", "authorization", "Bearer t"), headers.Passthrough(in))
}

func TestMetadataKey(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{"X-Custom": "x-custom", "Traceparent": "traceparent"} {
		got, ok := headers.MetadataKey(in)
		assert.True(t, ok, in)
		assert.Equal(t, want, got)
	}
	for _, dropped := range []string{"Epp-Profile", "Prefer", "Connection", "User-Agent", "Authorization", "Content-Type", "X-Request-Id"} {
		_, ok := headers.MetadataKey(dropped)
		assert.False(t, ok, dropped)
	}
}

func TestFromMetadata(t *testing.T) {
	t.Parallel()
	md := metadata.MD{
		"authorization": {"Bearer t"}, "x-custom": {"a", "b"}, ":authority": {"h"}, "user-agent": {"grpc-go"},
		"content-type": {"application/grpc"}, "grpc-timeout": {"1S"}, "x-trace-bin": {"\x00"}, "te": {"trailers"},
		"epp-profile": {"prefill"}, "x-request-id": {"r"}, "empty": {},
	}
	assert.Equal(t, headers.NewForwarded("authorization", "Bearer t", "x-custom", "a"), headers.FromMetadata(md))
}

// TestAnswerPolicy is the policy for the headers of a worker's answer (the
// decode leg's, a conditional-decode hit's), one row per header: whether it
// reaches gRPC clients as header metadata (AnswerMetadata) and REST clients
// as a response header (AnswerMetadata, then ResponseKey), with the
// worker's value.
func TestAnswerPolicy(t *testing.T) {
	t.Parallel()
	tests := map[string]bool{
		"Retry-After":                    true,
		"X-Ratelimit-Remaining-Requests": true,
		"X-Sim-Pool":                     true,
		"Date":                           true,
		"Server":                         true,
		"Vary":                           true,
		"Cache-Control":                  true,
		"Content-Encoding":               true,
		"Www-Authenticate":               true,
		"X_under.score":                  true,
		"Content-Length":                 false, // the coordinator's framing
		"Content-Type":                   false, // carried in the answer's message
		"X-Request-Id":                   false, // the coordinator's
		"Server-Timing":                  false, // the coordinator's step timings
		"Connection":                     false,
		"Keep-Alive":                     false,
		"Proxy-Authenticate":             false,
		"Proxy-Connection":               false,
		"Te":                             false,
		"Trailer":                        false,
		"Transfer-Encoding":              false,
		"Upgrade":                        false,
		"Grpc-Status":                    false, // gRPC's own
		"Grpc-Message":                   false,
		"User-Agent":                     false,
		"X-Trace-Bin":                    false, // binary metadata
		"X-Bang!":                        false, // a valid HTTP name, not a metadata key
	}
	for name, want := range tests {
		in := http.Header{name: {"v 1"}}
		md := headers.AnswerMetadata(in)
		key := lowerASCII(name)
		assert.Equal(t, want, len(md[key]) == 1 && md[key][0] == "v 1", "gRPC: %s", name)
		out := http.Header{}
		for k, vs := range md {
			if h, ok := headers.ResponseKey(k); ok {
				for _, v := range vs {
					out.Add(h, v)
				}
			}
		}
		assert.Equal(t, want, out.Get(name) == "v 1", "REST: %s", name)
		assert.Len(t, md, map[bool]int{true: 1, false: 0}[want], name)
	}
}

func TestAnswerMetadataKeepsEveryValueThatCanTravel(t *testing.T) {
	t.Parallel()
	in := http.Header{
		"Set-Cookie": {"a=1", "b=2"}, "X-Caf": {"caf\xc3\xa9", "ok"}, "Empty": {},
		"Connection": {"X-Named"}, "X-Named": {"hop"}, "Retry-After": {"7"},
	}
	assert.Equal(t, metadata.MD{"set-cookie": {"a=1", "b=2"}, "x-caf": {"ok"}, "retry-after": {"7"}}, headers.AnswerMetadata(in))
	assert.Equal(t, []string{"hop"}, in["X-Named"], "the input is not modified")
}

func TestResponseKey(t *testing.T) {
	t.Parallel()
	for key, want := range map[string]string{"server-timing": "Server-Timing", "retry-after": "Retry-After", "x-custom": "X-Custom"} {
		k, ok := headers.ResponseKey(key)
		assert.True(t, ok, key)
		assert.Equal(t, want, k)
	}
	for _, key := range []string{"x-request-id", "content-type", "content-length", "grpc-status", "x-trace-bin", ":status", "connection"} {
		_, ok := headers.ResponseKey(key)
		assert.False(t, ok, key)
	}
}

func TestDropHopByHop(t *testing.T) {
	t.Parallel()
	h := http.Header{
		"Connection": {"X-Named"}, "X-Named": {"n"}, "Keep-Alive": {"5"}, "Te": {"trailers"}, "Trailer": {"X-T"},
		"Transfer-Encoding": {"chunked"}, "Upgrade": {"websocket"}, "Proxy-Authenticate": {"Basic"},
		"Proxy-Authorization": {"Basic x"}, "Proxy-Connection": {"close"}, "X-Kept": {"k"},
	}
	headers.DropHopByHop(h)
	assert.Equal(t, http.Header{"X-Kept": {"k"}}, h)
}
