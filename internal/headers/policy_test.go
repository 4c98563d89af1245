package headers_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
		"X-Custom":                       all,
		"Traceparent":                    all,
		"X-Llm-D-Slo-Ttft-Ms":            none, // routing (D24)
		"X-Coordinator":                  all,  // no dash after: not reserved
		"X-Coordinatorx":                 all,
		"Cookie":                         all,
		"Authorization":                  {rest: true, restViaGRPC: false, grpc: true, passthrough: true}, // grpc-gateway forwards it itself
		"User-Agent":                     all,                                                             // through the call as grpcgateway-user-agent
		"Content-Type":                   {passthrough: true},
		"Epp-Profile":                    none,
		"Prefer":                         none,
		"X-Request-Id":                   none,
		"Accept-Encoding":                none,
		"Host":                           none,
		"Content-Length":                 none,
		"Expect":                         none,
		"Connection":                     none,
		"Keep-Alive":                     none,
		"Proxy-Authorization":            none,
		"Proxy-Authenticate":             none,
		"Proxy-Connection":               none,
		"Te":                             none,
		"Trailer":                        none,
		"Transfer-Encoding":              none,
		"Upgrade":                        none,
		"X-Coordinator-Phase":            none,
		"x-coordinator-":                 none,
		"Grpc-Timeout":                   {rest: true, restViaGRPC: false, grpc: false, passthrough: true},
		"Grpc-Anything":                  {rest: true, restViaGRPC: false, grpc: false, passthrough: true},
		"X-Trace-Bin":                    {rest: true, restViaGRPC: false, grpc: false, passthrough: true},
		"Grpc-Accept-Encoding":           {rest: true, restViaGRPC: false, grpc: false, passthrough: true},
		"X-Llm-D-Inference-Objective":    none,
		"X-Gateway-Destination-Endpoint": none,
		"X-Gateway-Model-Name":           none,
		"X-Prefiller-Host-Port":          none,
		"X-Decoder-Host-Port":            none,
		"X-Data-Parallel-Rank":           none,
		"X-Host-Port":                    all,                 // no name between x- and -host-port
		"Content-Encoding":               {passthrough: true}, // a body as sent only
		"Content-Range":                  {passthrough: true},
		"Digest":                         {passthrough: true},
		"Content-Md5":                    {passthrough: true},
		"Repr-Digest":                    {passthrough: true},
		"Content-Digest":                 {passthrough: true},
	}
	for name, want := range tests {
		in := http.Header{http.CanonicalHeaderKey(name): {"v"}}
		lower := http.CanonicalHeaderKey(name)
		fromHTTP, _ := headers.FromHTTP(in, headers.Trusted{})
		_, rest := has(fromHTTP, name)
		passed, _ := headers.Passthrough(in, headers.Trusted{}, true)
		_, pass := has(passed, name)
		md := metadata.MD{}
		if k, ok := headers.MetadataKey(lower); ok {
			md[k] = []string{"v"}
		}
		viaCall, _ := headers.FromMetadata(md, headers.Trusted{})
		_, viaGRPC := has(viaCall, name)
		fromCall, _ := headers.FromMetadata(metadata.MD{lowerASCII(name): {"v"}}, headers.Trusted{})
		_, grpc := has(fromCall, name)
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
	got, dropped := headers.FromHTTP(in, headers.Trusted{})
	assert.Equal(t, []string{"epp-profile", "prefer"}, dropped)
	assert.Equal(t, headers.NewForwarded("authorization", "Bearer a", "cookie", "c=1", "x-custom", "v", "traceparent", "00-x"), got)
	assert.Equal(t, []string{"authorization", "cookie", "traceparent", "x-custom"}, got.Names(), "names lowercased once")
	assert.Equal(t, []string{"Bearer a", "Bearer b"}, in["Authorization"], "the input is not modified")
	assert.False(t, headers.Forwardable("EPP-Profile"))
	assert.False(t, headers.Forwardable("X-Llm-D-Slo-Ttft-Ms"))
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
	got, _ := headers.FromHTTP(in, headers.Trusted{})
	assert.Equal(t, headers.NewForwarded("x-custom", "v", "x-coordinator", "no dash after: not reserved"), got)
	for name, want := range map[string]bool{"X-Coordinator-Anything": false, "x-coordinator-": false, "Trailer": false, "X-Coordinatorx": true, "X-Hop-One": true} {
		assert.Equal(t, want, headers.Forwardable(name), name)
	}
}

func TestPassthroughCarriesTheClientsContentType(t *testing.T) {
	t.Parallel()
	in := http.Header{"Content-Type": {"text/plain"}, "Connection": {"X-Secret"}, "X-Secret": {"s"}, "Authorization": {"Bearer t"},
		"Content-Encoding": {"gzip"}, "Digest": {"sha-256=x"}}
	got, _ := headers.Passthrough(in, headers.Trusted{}, false)
	assert.Equal(t, headers.NewForwarded("content-type", "text/plain", "authorization", "Bearer t"), got, "a rewritten body")
	got, _ = headers.Passthrough(in, headers.Trusted{}, true)
	assert.Equal(t, headers.NewForwarded("content-type", "text/plain", "authorization", "Bearer t", "content-encoding", "gzip", "digest", "sha-256=x"), got, "the body as sent")
}

func TestMetadataKey(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{"X-Custom": "x-custom", "Traceparent": "traceparent"} {
		got, ok := headers.MetadataKey(in)
		assert.True(t, ok, in)
		assert.Equal(t, want, got)
	}
	for in, want := range map[string]string{"User-Agent": "grpcgateway-user-agent", "Epp-Profile": "epp-profile", "X-Gateway-Model-Name": "x-gateway-model-name"} {
		got, ok := headers.MetadataKey(in)
		assert.True(t, ok, in)
		assert.Equal(t, want, got, "routing headers go into the call, where FromMetadata drops and reports them")
	}
	for _, dropped := range []string{"Connection", "Authorization", "Content-Type", "X-Request-Id", "Grpcgateway-User-Agent", "Content-Encoding"} {
		_, ok := headers.MetadataKey(dropped)
		assert.False(t, ok, dropped)
	}
}

func TestFromMetadata(t *testing.T) {
	t.Parallel()
	md := metadata.MD{
		"authorization": {"Bearer t"}, "x-custom": {"a", "b"}, ":authority": {"h"}, "user-agent": {"grpc-go/1.70.0"},
		"content-type": {"application/grpc"}, "grpc-timeout": {"1S"}, "x-trace-bin": {"\x00"}, "te": {"trailers"},
		"epp-profile": {"prefill"}, "x-request-id": {"r"}, "empty": {},
	}
	got, dropped := headers.FromMetadata(md, headers.Trusted{})
	assert.Equal(t, headers.NewForwarded("authorization", "Bearer t", "x-custom", "a"), got)
	assert.Equal(t, []string{"epp-profile"}, dropped)
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

// TestRoutingHeaders: the routing namespace is the coordinator's (compat
// D24): a client's routing headers are dropped and reported on every
// boundary, unless a Trusted set names them; EPP-Profile and Prefer can
// never be trusted.
func TestRoutingHeaders(t *testing.T) {
	t.Parallel()
	in := http.Header{
		"X-Gateway-Destination-Endpoint": {"10.0.0.9:8000"}, "X-Gateway-Destination-Endpoint-Subset": {"a"},
		"X-Gateway-Model-Name": {"m"}, "X-Prefiller-Host-Port": {"10.0.0.8:8000"}, "X-Llm-D-Slo-Ttft-Ms": {"10"},
		"X-Data-Parallel-Rank": {"1"}, "Epp-Profile": {"prefill"}, "Prefer": {"if-available"}, "X-Custom": {"c"},
	}
	all := []string{"epp-profile", "prefer", "x-data-parallel-rank", "x-gateway-destination-endpoint",
		"x-gateway-destination-endpoint-subset", "x-gateway-model-name", "x-llm-d-slo-ttft-ms", "x-prefiller-host-port"}
	md := metadata.MD{}
	for k, v := range in {
		key, ok := headers.MetadataKey(k)
		require.True(t, ok, k)
		md[key] = v
	}
	fromHTTP, dropped := headers.FromHTTP(in, headers.Trusted{})
	assert.Equal(t, headers.NewForwarded("x-custom", "c"), fromHTTP)
	assert.Equal(t, all, dropped)
	passed, dropped := headers.Passthrough(in, headers.Trusted{}, true)
	assert.Equal(t, headers.NewForwarded("x-custom", "c"), passed)
	assert.Equal(t, all, dropped)
	fromCall, dropped := headers.FromMetadata(md, headers.Trusted{})
	assert.Equal(t, headers.NewForwarded("x-custom", "c"), fromCall)
	assert.Equal(t, all, dropped)

	trusted := headers.NewTrusted("X-LLM-D-SLO-TTFT-MS", "x-gateway-model-name", "Epp-Profile", "prefer", "x-custom")
	want := headers.NewForwarded("x-custom", "c", "x-llm-d-slo-ttft-ms", "10", "x-gateway-model-name", "m")
	rest := []string{"epp-profile", "prefer", "x-data-parallel-rank", "x-gateway-destination-endpoint",
		"x-gateway-destination-endpoint-subset", "x-prefiller-host-port"}
	fromHTTP, dropped = headers.FromHTTP(in, trusted)
	assert.Equal(t, want, fromHTTP)
	assert.Equal(t, rest, dropped)
	fromCall, dropped = headers.FromMetadata(md, trusted)
	assert.Equal(t, want, fromCall)
	assert.Equal(t, rest, dropped)

	for name, want := range map[string]bool{"x-gateway-model-name": true, "X-Foo-Host-Port": true, "x-llm-d-x": true,
		"Epp-Profile": false, "Prefer": false, "X-Custom": false, "X-Request-Id": false} {
		assert.Equal(t, want, headers.Trustable(name), name)
	}
	_, none := headers.FromHTTP(http.Header{"X-Custom": {"c"}}, headers.Trusted{})
	assert.Nil(t, none)
}

// TestUserAgentFromMetadata: the legs carry the client's User-Agent: a
// REST client's through the in-process call, a gRPC client's less
// grpc-go's own product.
func TestUserAgentFromMetadata(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		md   metadata.MD
		want string
	}{
		{metadata.MD{"grpcgateway-user-agent": {"curl/8"}, "user-agent": {"grpc-go/1.70.0"}}, "curl/8"},
		{metadata.MD{"user-agent": {"my-app/2 grpc-go/1.70.0"}}, "my-app/2"},
		{metadata.MD{"user-agent": {"grpc-go/1.70.0"}}, ""},
		{metadata.MD{"user-agent": {"grpc-java-netty/1.60.0"}}, "grpc-java-netty/1.60.0"},
		{metadata.MD{"user-agent": {"not-grpc-go/1"}}, "not-grpc-go/1"},
		{metadata.MD{}, ""},
	} {
		got, _ := headers.FromMetadata(tc.md, headers.Trusted{})
		assert.Equal(t, tc.want, got.Get("User-Agent"), "%v", tc.md)
		assert.Equal(t, tc.want != "", got.Has("user-agent"), "%v", tc.md)
		assert.False(t, got.Has("grpcgateway-user-agent"))
	}
}

func TestEncoded(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		values []string
		want   bool
	}{
		{nil, false}, {[]string{"identity"}, false}, {[]string{" Identity , identity"}, false}, {[]string{""}, false},
		{[]string{"gzip"}, true}, {[]string{"identity, br"}, true}, {[]string{"identity", "x-anything"}, true},
	} {
		h := http.Header{}
		for _, v := range tc.values {
			h.Add("Content-Encoding", v)
		}
		assert.Equal(t, tc.want, headers.Encoded(h), "%q", tc.values)
	}
}
