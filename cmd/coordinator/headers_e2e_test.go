package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/metadata"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
	"github.com/coordinator-project/coordinator/internal/headers"
	"github.com/coordinator-project/coordinator/sim"
)

// heardLeg is what one leg's server received.
type heardLeg struct {
	kind             string // render, encode, prefill, conditional-decode, decode, passthrough
	host             string
	header           http.Header
	contentLength    int64
	transferEncoding []string
	body             int
}

// earpiece records every request its handlers receive, then lets the
// simulator answer.
type earpiece struct {
	mu   sync.Mutex
	legs []heardLeg
}

func (e *earpiece) wrap(service string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		e.mu.Lock()
		e.legs = append(e.legs, heardLeg{kind: legKind(service, r), host: r.Host, header: r.Header.Clone(),
			contentLength: r.ContentLength, transferEncoding: r.TransferEncoding, body: len(body)})
		e.mu.Unlock()
		next.ServeHTTP(w, r)
	})
}

// of returns the legs of the request with x-request-id id.
func (e *earpiece) of(id string) []heardLeg {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []heardLeg
	for _, l := range e.legs {
		if headers.IsLegRequestID(l.header.Get("X-Request-Id"), id) {
			out = append(out, l)
		}
	}
	return out
}

func legKind(service string, r *http.Request) string {
	switch {
	case service == sim.ServiceRender:
		return "render"
	case r.Method == http.MethodGet:
		return "passthrough"
	case r.Header.Get("Prefer") != "":
		return "conditional-" + r.Header.Get("Epp-Profile")
	}
	return r.Header.Get("Epp-Profile")
}

// hostileHeaders are the headers a client must not control, as a client
// sends them, with the value each is sent with.
var hostileHeaders = map[string]string{
	"Epp-Profile":         "prefill",
	"Prefer":              "if-available",
	"Connection":          "keep-alive, X-Named-Hop",
	"X-Named-Hop":         "named by Connection",
	"Keep-Alive":          "timeout=5",
	"Te":                  "trailers",
	"Upgrade":             "websocket",
	"Proxy-Authorization": "Basic cHJveHk6c2VjcmV0",
	"Proxy-Authenticate":  "Basic",
	"Proxy-Connection":    "keep-alive",
	"Expect":              "100-continue",
	"Accept-Encoding":     "gzip",
	"X-Coordinator-Phase": "prefill",
	// the routing namespace is the coordinator's (compat D24)
	"X-Gateway-Destination-Endpoint":        "169.254.169.254:80",
	"X-Gateway-Destination-Endpoint-Subset": "10.0.0.9:8000",
	"X-Gateway-Model-Name":                  "other-tenant-model",
	"X-Prefiller-Host-Port":                 "10.0.0.8:8000",
	"X-Llm-D-Slo-Ttft-Ms":                   "1",
	"X-Data-Parallel-Rank":                  "3",
	// they describe the client's body, not the leg's
	"Digest":         "sha-256=X48E9qOokqqrvdts8nOJRJN3OWDUoyWxBf7kbu9DBPE=",
	"Content-Md5":    "Q2hlY2sgSW50ZWdyaXR5IQ==",
	"Repr-Digest":    "sha-256=:X48E9qOokqqrvdts8nOJRJN3OWDUoyWxBf7kbu9DBPE=:",
	"Content-Digest": "sha-256=:X48E9qOokqqrvdts8nOJRJN3OWDUoyWxBf7kbu9DBPE=:",
	"Content-Range":  "bytes 0-1/2",
}

// bodyHeaders are the hostile headers a passthrough leg whose body is the
// client's as sent (here: none) carries as they came.
var bodyHeaders = []string{"Digest", "Content-Md5", "Repr-Digest", "Content-Digest", "Content-Range"}

// clientUserAgent is the User-Agent of the raw REST client: every leg of
// its requests carries it.
const clientUserAgent = "e2e-client/1.0"

// keptHeaders are client headers every leg carries as they came.
var keptHeaders = map[string]string{
	"Authorization":   "Bearer client-token",
	"X-Custom":        "kept",
	"X-Forwarded-For": "203.0.113.7",
	"Traceparent":     "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
}

// imageChat makes every leg of the cascade run: render, conditional-decode
// (a miss: the question is new), encode for the image, prefill, decode.
func imageChat(question string) string {
	return `{"model":"sim-model","max_tokens":3,"messages":[{"role":"user","content":[` +
		`{"type":"text","text":"` + question + `"},{"type":"image_url","image_url":{"url":"` + imageURL + `"}}]}]}`
}

func TestClientHeadersNeverReachALeg(t *testing.T) {
	t.Parallel()
	s := sim.New(sim.Options{})
	ear := &earpiece{}
	gw := httptest.NewServer(ear.wrap(sim.ServiceGateway, s.Gateway()))
	t.Cleanup(gw.Close)
	render := httptest.NewServer(ear.wrap(sim.ServiceRender, s.Render()))
	t.Cleanup(render.Close)
	st := startStack(t, gw.URL, render.URL, fullPipeline)
	hosts := map[string]string{"render": strings.TrimPrefix(render.URL, "http://")}
	gwHost := strings.TrimPrefix(gw.URL, "http://")
	restAddr := strings.TrimPrefix(st.restURL, "http://")
	pipelineLegs := []string{"conditional-decode", "decode", "encode", "prefill", "render"}

	t.Run("REST chunked", func(t *testing.T) {
		t.Parallel()
		status := rawPost(t, restAddr, "/v1/chat/completions", "rest-chunked", imageChat("What is in this chunked picture?"), true)
		require.Equal(t, http.StatusOK, status)
		checkLegs(t, ear.of("rest-chunked"), pipelineLegs, hosts, gwHost)
		checkUserAgent(t, ear.of("rest-chunked"), clientUserAgent)
	})
	t.Run("REST with Content-Length", func(t *testing.T) {
		t.Parallel()
		status := rawPost(t, restAddr, "/v1/chat/completions", "rest-length", imageChat("What is in this picture?"), false)
		require.Equal(t, http.StatusOK, status)
		checkLegs(t, ear.of("rest-length"), pipelineLegs, hosts, gwHost)
	})
	t.Run("REST streaming", func(t *testing.T) {
		t.Parallel()
		status := rawPost(t, restAddr, "/v1/chat/completions", "rest-stream", strings.Replace(imageChat("What is in this streamed picture?"), `{"model"`, `{"stream":true,"model"`, 1), false)
		require.Equal(t, http.StatusOK, status)
		checkLegs(t, ear.of("rest-stream"), pipelineLegs, hosts, gwHost)
		checkUserAgent(t, ear.of("rest-stream"), clientUserAgent)
	})
	t.Run("REST passthrough", func(t *testing.T) {
		t.Parallel()
		status := rawRequest(t, restAddr, http.MethodGet, "/v1/models", "rest-pass", "", false)
		require.Equal(t, http.StatusOK, status)
		checkLegs(t, ear.of("rest-pass"), []string{"passthrough"}, hosts, gwHost)
		checkUserAgent(t, ear.of("rest-pass"), clientUserAgent)
	})
	t.Run("gRPC", func(t *testing.T) {
		t.Parallel()
		md := metadata.MD{}
		for k, v := range hostileHeaders {
			if k != "Connection" && k != "X-Named-Hop" { // Connection is refused by the transport: see below
				md.Append(strings.ToLower(k), v)
			}
		}
		for k, v := range keptHeaders {
			md.Append(strings.ToLower(k), v)
		}
		md.Append("host", "evil.example")
		md.Append("content-length", "1")
		md.Append("transfer-encoding", "chunked")
		md.Append("trailer", "X-Trailer")
		md.Append("content-encoding", "gzip")
		ctx, cancel := context.WithTimeout(metadata.NewOutgoingContext(context.Background(), md), 10*time.Second)
		defer cancel()
		_, err := coordinatorv1.NewCoordinatorServiceClient(st.conn).Generate(ctx, chatRequest("grpc-headers", imageChat("What is in this gRPC picture?")))
		require.NoError(t, err)
		checkLegs(t, ear.of("grpc-headers"), pipelineLegs, hosts, gwHost)
		checkUserAgent(t, ear.of("grpc-headers"), "coordinator") // grpc-go's own is not the client's
		for _, l := range ear.of("grpc-headers") {
			assert.Empty(t, l.header.Values("Content-Encoding"), "Content-Encoding reached the %s leg", l.kind)
		}
	})
	t.Run("gRPC Connection is refused by the transport", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		ctx = metadata.AppendToOutgoingContext(ctx, "connection", "x-named-hop", "x-named-hop", "v")
		_, err := coordinatorv1.NewCoordinatorServiceClient(st.conn).Generate(ctx, chatRequest("grpc-connection", imageChat("Is this refused?")))
		require.Error(t, err, "HTTP/2 forbids connection-specific headers")
		assert.Empty(t, ear.of("grpc-connection"), "no leg for a malformed call")
	})
}

// checkLegs holds the legs of one request to the header rules: exactly the
// kinds wanted ran; none carries a hostile header, the client's Host,
// Content-Length or framing; each has its own Content-Type, profile,
// Prefer and request id; the kept headers arrived as they were sent.
func checkLegs(t *testing.T, legs []heardLeg, kinds []string, hosts map[string]string, gwHost string) {
	t.Helper()
	var got []string
	for _, l := range legs {
		if !slices.Contains(got, l.kind) {
			got = append(got, l.kind)
		}
	}
	slices.Sort(got)
	require.Equal(t, kinds, got, "the legs that ran")
	for _, l := range legs {
		t.Run(l.kind, func(t *testing.T) {
			for name := range hostileHeaders {
				if name == "Epp-Profile" || name == "Prefer" || name == "Connection" {
					continue // the coordinator's own values are checked below
				}
				if l.kind == "passthrough" && slices.Contains(bodyHeaders, name) {
					assert.Equal(t, []string{hostileHeaders[name]}, l.header.Values(name), "a body as sent keeps %s", name)
					continue
				}
				assert.Empty(t, l.header.Values(name), "%s reached the %s leg", name, l.kind)
			}
			assert.Empty(t, l.header.Values("Connection"), "Connection reached the %s leg", l.kind)
			for _, name := range []string{"Trailer", "Transfer-Encoding", "Host"} {
				assert.Empty(t, l.header.Values(name), "%s reached the %s leg", name, l.kind)
			}
			for name, v := range keptHeaders {
				if name == "X-Forwarded-For" && l.kind == "passthrough" {
					v += ", 127.0.0.1" // a reverse proxy appends the client's address
				}
				assert.Equal(t, []string{v}, l.header.Values(name), "%s on the %s leg", name, l.kind)
			}
			want := hosts[l.kind]
			if want == "" {
				want = gwHost
			}
			assert.Equal(t, want, l.host, "the leg's own Host")
			assert.Empty(t, l.transferEncoding, "the leg's own framing")
			assert.EqualValues(t, l.body, l.contentLength, "the leg's own Content-Length")
			if l.kind != "passthrough" {
				assert.Equal(t, "application/json", l.header.Get("Content-Type"))
			}
			assert.Equal(t, map[string]string{
				"render": "", "encode": "encode", "prefill": "prefill", "conditional-decode": "decode", "decode": "decode", "passthrough": "decode",
			}[l.kind], l.header.Get("Epp-Profile"), "the leg's own profile")
			wantPrefer := ""
			if l.kind == "conditional-decode" {
				wantPrefer = "if-available"
			}
			assert.Equal(t, wantPrefer, l.header.Get("Prefer"), "only conditional-decode asks for if-available")
		})
	}
}

// checkUserAgent checks that each leg carries want as its only User-Agent.
func checkUserAgent(t *testing.T, legs []heardLeg, want string) {
	t.Helper()
	for _, l := range legs {
		assert.Equal(t, []string{want}, l.header.Values("User-Agent"), "the %s leg's User-Agent", l.kind)
	}
}

// rawPost sends body to path as a client writing its own request would,
// with every hostile and kept header, Host: evil.example, and either
// chunked framing (Transfer-Encoding and a Trailer) or Content-Length.
// It returns the status and reads the answer to its end.
func rawPost(t *testing.T, addr, path, id, body string, chunked bool) int {
	t.Helper()
	return rawRequest(t, addr, http.MethodPost, path, id, body, chunked)
}

func rawRequest(t *testing.T, addr, method, path, id, body string, chunked bool) int {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, conn.SetDeadline(time.Now().Add(20*time.Second)))

	var req strings.Builder
	fmt.Fprintf(&req, "%s %s HTTP/1.1\r\nHost: evil.example\r\nX-Request-Id: %s\r\nUser-Agent: %s\r\n", method, path, id, clientUserAgent)
	for k, v := range hostileHeaders {
		fmt.Fprintf(&req, "%s: %s\r\n", k, v)
	}
	for k, v := range keptHeaders {
		fmt.Fprintf(&req, "%s: %s\r\n", k, v)
	}
	if method == http.MethodPost {
		req.WriteString("Content-Type: application/json; charset=utf-8\r\n")
	}
	switch {
	case chunked:
		fmt.Fprintf(&req, "Transfer-Encoding: chunked\r\nTrailer: X-Trailer\r\n\r\n%x\r\n%s\r\n0\r\nX-Trailer: t\r\n\r\n", len(body), body)
	default:
		fmt.Fprintf(&req, "Content-Length: %d\r\n\r\n%s", len(body), body)
	}
	_, err = io.WriteString(conn, req.String())
	require.NoError(t, err)
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	for err == nil && resp.StatusCode == http.StatusContinue { // Expect: 100-continue
		resp, err = http.ReadResponse(br, nil)
	}
	require.NoError(t, err)
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	if resp.StatusCode != http.StatusOK {
		t.Logf("%d: %s", resp.StatusCode, answer)
	}
	return resp.StatusCode
}
