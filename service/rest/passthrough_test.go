package rest

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
	"github.com/coordinator-project/coordinator/internal/gateway"
	"github.com/coordinator-project/coordinator/internal/headers"
	"github.com/coordinator-project/coordinator/service"
	"github.com/coordinator-project/coordinator/service/admission"
	"github.com/coordinator-project/coordinator/service/config"
	"github.com/coordinator-project/coordinator/service/metrics"
)

// passFront is the REST front with a passthrough to a test gateway, served
// on loopback.
type passFront struct {
	url     string
	metrics *metrics.Metrics
	client  *http.Client
}

type passOptions struct {
	maxBody       int64
	headerTimeout time.Duration
	writeTimeout  time.Duration
	readTimeout   time.Duration
	admission     *admission.Controller
	service       coordinatorv1.CoordinatorServiceClient // nil: none, for tests that reach no served route
	trusted       []string                               // server.trusted_routing_headers
}

// startPassFront serves a Handler (no CoordinatorService behind it) whose
// passthrough relays to gatewayURL.
func startPassFront(t *testing.T, gatewayURL string, o passOptions) *passFront {
	t.Helper()
	h := newPassHandler(t, gatewayURL, o)
	front := httptest.NewUnstartedServer(h)
	front.Config.ReadTimeout = o.readTimeout
	front.Start()
	t.Cleanup(front.Close)
	client := &http.Client{Transport: &http.Transport{}, Timeout: 10 * time.Second}
	t.Cleanup(client.CloseIdleConnections)
	return &passFront{url: front.URL, metrics: h.metrics, client: client}
}

// newPassHandler is a Handler (no CoordinatorService behind it) whose
// passthrough relays to gatewayURL.
func newPassHandler(t testing.TB, gatewayURL string, o passOptions) *Handler {
	t.Helper()
	gw, err := gateway.New(gateway.Options{Address: gatewayURL, ResponseHeaderTimeout: o.headerTimeout})
	require.NoError(t, err)
	t.Cleanup(gw.Close)
	return testHandler(t, o.service, Options{MaxBody: o.maxBody, StreamWriteTimeout: o.writeTimeout,
		Trusted:     headers.NewTrusted(o.trusted...),
		Passthrough: &Passthrough{Gateway: gw, Admission: o.admission, Log: slog.New(slog.DiscardHandler)}})
}

// startGateway serves handler as the gateway and counts its requests.
func startGateway(t testing.TB, handler http.HandlerFunc) (string, *atomic.Int32) {
	t.Helper()
	var hits atomic.Int32
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		handler(w, r)
	}))
	t.Cleanup(gw.Close)
	return gw.URL, &hits
}

func (f *passFront) do(t *testing.T, req *http.Request) (*http.Response, string) {
	t.Helper()
	resp, err := f.client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(body)
}

func newRequest(t *testing.T, method, url string, body io.Reader) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	require.NoError(t, err)
	return req
}

// openAIError decodes an OpenAI error body.
func openAIError(t *testing.T, body string) (message, typ string, code int) {
	t.Helper()
	var e struct {
		Error struct {
			Message string `json:"message"`
			Type    string `json:"type"`
			Code    int    `json:"code"`
		} `json:"error"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &e), body)
	return e.Error.Message, e.Error.Type, e.Error.Code
}

func TestPassthroughRelaysTheRequestToTheDecodeProfile(t *testing.T) {
	t.Parallel()
	got := make(chan *http.Request, 2)
	gw, _ := startGateway(t, func(w http.ResponseWriter, r *http.Request) {
		got <- r.Clone(context.Background())
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Upstream", "yes")
		w.Header().Set("Connection", "X-Gateway-Hop")
		w.Header().Set("X-Gateway-Hop", "internal")
		w.WriteHeader(http.StatusAccepted)
		_, _ = io.WriteString(w, `{"object":"list","data":[]}`)
	})
	f := startPassFront(t, gw, passOptions{})

	req := newRequest(t, http.MethodGet, f.url+"/v1/models?limit=2&name=a%20b", nil)
	req.Header = http.Header{
		"Authorization": {"Bearer tok"}, "Epp-Profile": {"prefill"}, "X-Request-Id": {"bad id!"},
		"Connection": {"X-Secret-Hop"}, "X-Secret-Hop": {"s"}, "Prefer": {"if-available"}, "X-Custom": {"c"},
		"Traceparent": {"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
	}
	resp, body := f.do(t, req)
	assert.Equal(t, http.StatusAccepted, resp.StatusCode, "the gateway's status, whatever it is")
	assert.JSONEq(t, `{"object":"list","data":[]}`, body)
	assert.Equal(t, "yes", resp.Header.Get("X-Upstream"))
	assert.Empty(t, resp.Header.Get("X-Gateway-Hop"), "headers the answer's Connection names stay behind")
	id := resp.Header.Get("X-Request-Id")
	assert.True(t, headers.ValidRequestID(id) && id != "bad id!", id)

	r := <-got
	assert.Equal(t, http.MethodGet, r.Method)
	assert.Equal(t, "/v1/models", r.URL.Path)
	assert.Equal(t, "limit=2&name=a%20b", r.URL.RawQuery, "the query as the client sent it")
	assert.Equal(t, "decode", r.Header.Get("EPP-Profile"))
	assert.Equal(t, []string{id}, r.Header.Values("X-Request-Id"), "the regenerated id, the one the client got")
	assert.Equal(t, "Bearer tok", r.Header.Get("Authorization"))
	assert.Equal(t, "c", r.Header.Get("X-Custom"))
	assert.Equal(t, "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", r.Header.Get("Traceparent"))
	assert.Equal(t, "127.0.0.1", r.Header.Get("X-Forwarded-For"))
	assert.NotEmpty(t, r.Header.Get("X-Forwarded-Host"))
	for _, stripped := range []string{"X-Secret-Hop", "Prefer"} {
		assert.Empty(t, r.Header.Get(stripped), stripped)
	}
	assert.Len(t, r.Header.Values("Epp-Profile"), 1, "the client's profile is replaced, not added to")

	req = newRequest(t, http.MethodGet, f.url+"/tokenize", nil)
	req.Header.Set("X-Request-Id", "req-valid-1")
	resp, _ = f.do(t, req)
	assert.Equal(t, "req-valid-1", resp.Header.Get("X-Request-Id"))
	assert.Equal(t, "req-valid-1", (<-got).Header.Get("X-Request-Id"), "a valid id is kept")

	// The handler counts a request as it returns, after the client may have
	// read the whole answer.
	assert.Eventually(t, func() bool {
		return counter(t, f.metrics, "coordinator_requests_total", map[string]string{"endpoint": "passthrough", "status": "202"}) == 2
	}, 5*time.Second, time.Millisecond, "both requests counted")
	assert.Equal(t, 2.0, counter(t, f.metrics, "coordinator_leg_duration_seconds", map[string]string{"phase": "decode", "status": "202"}))
}

func TestPassthroughBodyIsRelayedByteExact(t *testing.T) {
	t.Parallel()
	type seen struct {
		body          []byte
		contentType   string
		contentLength int64
	}
	got := make(chan seen, 3)
	gw, _ := startGateway(t, func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			w.WriteHeader(http.StatusTeapot)
			return
		}
		got <- seen{body: b, contentType: r.Header.Get("Content-Type"), contentLength: r.ContentLength}
		w.Header().Set("Content-Type", "application/octet-stream")
		_, _ = w.Write(b)
	})
	f := startPassFront(t, gw, passOptions{})
	body := `{"model":"m", "input":["a",  "é\u00e9"],"x":1.50e3}` + " \n"

	req := newRequest(t, http.MethodPost, f.url+"/v1/embeddings", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json; charset=utf-8")
	resp, echoed := f.do(t, req)
	require.Equal(t, http.StatusOK, resp.StatusCode, echoed)
	assert.Equal(t, body, echoed)
	s := <-got
	assert.Equal(t, body, string(s.body), "not one byte changed")
	assert.Equal(t, "application/json; charset=utf-8", s.contentType, "the client's content type")
	assert.Equal(t, int64(len(body)), s.contentLength, "a known length is sent as such")

	chunked := newRequest(t, http.MethodPost, f.url+"/v1/embeddings", io.MultiReader(strings.NewReader(body)))
	resp, echoed = f.do(t, chunked)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, body, echoed)
	s = <-got
	assert.Equal(t, body, string(s.body))
	assert.Equal(t, int64(len(body)), s.contentLength, "a JSON body is read whole (checked), then sent with its length")

	// A form to an audio route streams as it comes, whatever its bytes.
	form := "--x\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\n\x00\xff\r\n--x--\r\n"
	chunked = newRequest(t, http.MethodPost, f.url+"/v1/audio/transcriptions", io.MultiReader(strings.NewReader(form)))
	chunked.Header.Set("Content-Type", "multipart/form-data; boundary=x")
	resp, echoed = f.do(t, chunked)
	require.Equal(t, http.StatusOK, resp.StatusCode, echoed)
	assert.Equal(t, form, echoed)
	s = <-got
	assert.Equal(t, form, string(s.body))
	assert.Equal(t, int64(-1), s.contentLength, "an unknown length stays unknown (chunked)")
	// The handler counts a request's bytes as it returns, after the client
	// may have read the whole answer.
	assert.Eventually(t, func() bool {
		return counter(t, f.metrics, "coordinator_body_bytes_total", map[string]string{"direction": "in"}) == float64(2*len(body)+len(form))
	}, 5*time.Second, time.Millisecond, "every body counted in")
}

func TestPassthroughBodyCap(t *testing.T) {
	t.Parallel()
	var complete atomic.Int32
	gw, hits := startGateway(t, func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err == nil {
			complete.Add(1)
		}
	})
	const maxBody = 4 << 10
	f := startPassFront(t, gw, passOptions{maxBody: maxBody})

	resp, body := f.do(t, newRequest(t, http.MethodPost, f.url+"/v1/embeddings", strings.NewReader(strings.Repeat("a", maxBody+1))))
	assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
	msg, _, code := openAIError(t, body)
	assert.Equal(t, http.StatusRequestEntityTooLarge, code)
	assert.Equal(t, "request body too large: content-length 4097 exceeds the limit of 4096 bytes (request_id: "+resp.Header.Get("X-Request-Id")+")", msg)
	assert.Zero(t, hits.Load(), "an announced oversized body never reaches the gateway")
	assert.True(t, resp.Close, "past the cap the connection closes rather than read the rest")

	// Without Content-Length the body streams to the gateway until the cap:
	// the gateway never gets it whole.
	over := io.MultiReader(strings.NewReader(strings.Repeat("b", 3*maxBody)))
	resp, body = f.do(t, newRequest(t, http.MethodPost, f.url+"/v1/embeddings", over))
	assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, body)
	assert.Zero(t, complete.Load(), "a chunked oversized body is cut before its end")

	atCap := `{"a":"` + strings.Repeat("c", maxBody-8) + `"}`
	resp, body = f.do(t, newRequest(t, http.MethodPost, f.url+"/v1/embeddings", strings.NewReader(atCap)))
	assert.Equal(t, http.StatusOK, resp.StatusCode, "exactly at the cap is fine: %s", body)
	assert.Equal(t, int32(1), complete.Load())

	// A form streams to the gateway until the cap.
	form := newRequest(t, http.MethodPost, f.url+"/v1/audio/transcriptions", io.MultiReader(strings.NewReader(strings.Repeat("d", 3*maxBody))))
	form.Header.Set("Content-Type", "multipart/form-data; boundary=x")
	resp, body = f.do(t, form)
	assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, body)
	assert.Equal(t, int32(1), complete.Load(), "a chunked oversized form is cut before its end")
}

func TestPassthroughSlowBodyIs408(t *testing.T) {
	t.Parallel()
	var complete atomic.Int32
	gw, _ := startGateway(t, func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err == nil {
			complete.Add(1)
		}
	})
	f := startPassFront(t, gw, passOptions{readTimeout: 200 * time.Millisecond})
	pr, pw := io.Pipe()
	defer pw.Close()
	go func() { _, _ = pw.Write([]byte(`{"input":`)) }() // then nothing: the body never ends
	resp, body := f.do(t, newRequest(t, http.MethodPost, f.url+"/v1/embeddings", pr))
	assert.Equal(t, http.StatusRequestTimeout, resp.StatusCode, body)
	msg, _, _ := openAIError(t, body)
	assert.Contains(t, msg, "request body not received within server.read_timeout")
	assert.Zero(t, complete.Load())
}

func TestPassthroughStreamsEventsAsTheyCome(t *testing.T) {
	t.Parallel()
	second := make(chan struct{})
	gw, _ := startGateway(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: {\"n\":1}\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-second:
		case <-r.Context().Done():
			return
		}
		_, _ = io.WriteString(w, "data: {\"n\":2}\n\ndata: [DONE]\n\n")
	})
	f := startPassFront(t, gw, passOptions{writeTimeout: time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.url+"/v1/embeddings", strings.NewReader(`{"stream":true}`))
	require.NoError(t, err)
	resp, err := f.client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))

	rd := bufio.NewReader(resp.Body)
	line, err := rd.ReadString('\n')
	require.NoError(t, err, "the first event arrives while the gateway holds the second")
	assert.Equal(t, "data: {\"n\":1}\n", line)
	close(second)
	rest, err := io.ReadAll(rd)
	require.NoError(t, err)
	assert.Equal(t, "\ndata: {\"n\":2}\n\ndata: [DONE]\n\n", string(rest))
}

func TestPassthroughGatewayFailures(t *testing.T) {
	t.Parallel()
	down := httptest.NewServer(http.NotFoundHandler())
	downURL := down.URL
	down.Close()
	hang, _ := startGateway(t, func(_ http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	tests := []struct {
		name    string
		gateway string
		status  int
		typ     string
		message string
	}{
		{name: "gateway down", gateway: downURL, status: http.StatusBadGateway, typ: "api_error", message: "passthrough unreachable"},
		{name: "no headers in time", gateway: hang, status: http.StatusGatewayTimeout, typ: "timeout_error", message: "passthrough timed out"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := startPassFront(t, tt.gateway, passOptions{headerTimeout: 100 * time.Millisecond})
			resp, body := f.do(t, newRequest(t, http.MethodGet, f.url+"/v1/models", nil))
			assert.Equal(t, tt.status, resp.StatusCode)
			assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
			msg, typ, code := openAIError(t, body)
			assert.Equal(t, tt.status, code)
			assert.Equal(t, tt.typ, typ)
			assert.Equal(t, tt.message+" (request_id: "+resp.Header.Get("X-Request-Id")+")", msg)
			assert.Equal(t, 1.0, counter(t, f.metrics, "coordinator_leg_duration_seconds", map[string]string{"phase": "decode", "status": "0"}))
		})
	}
}

func TestPassthroughAnswerCutMidBodyIsNotACleanEnd(t *testing.T) {
	t.Parallel()
	gw, _ := startGateway(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: {\"n\":1}\n\n")
		w.(http.Flusher).Flush()
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			_ = conn.Close() // no terminating chunk: the gateway broke off
		}
	})
	f := startPassFront(t, gw, passOptions{})
	resp, err := f.client.Do(newRequest(t, http.MethodGet, f.url+"/v1/stream", nil))
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	got, err := io.ReadAll(resp.Body)
	assert.Error(t, err, "the client sees the answer broke off")
	assert.Equal(t, "data: {\"n\":1}\n\n", string(got), "what came before is relayed")
}

func TestPassthroughClientCancelCancelsTheGatewayRequest(t *testing.T) {
	t.Parallel()
	started, cancelled := make(chan struct{}), make(chan struct{})
	gw, _ := startGateway(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.(http.Flusher).Flush()
		close(started)
		<-r.Context().Done()
		close(cancelled)
	})
	f := startPassFront(t, gw, passOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.url+"/v1/stream", nil)
	require.NoError(t, err)
	resp, err := f.client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	<-started
	at := time.Now()
	cancel()
	select {
	case <-cancelled:
		t.Logf("gateway request cancelled %s after the client's cancel", time.Since(at))
	case <-time.After(5 * time.Second):
		t.Fatal("the gateway request outlived the client")
	}
}

func TestPassthroughSlowReaderIsCut(t *testing.T) {
	t.Parallel()
	cut := make(chan struct{})
	gw, _ := startGateway(t, func(w http.ResponseWriter, r *http.Request) {
		defer close(cut)
		chunk := []byte("data: " + strings.Repeat("x", 64<<10) + "\n\n")
		for r.Context().Err() == nil {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})
	f := startPassFront(t, gw, passOptions{writeTimeout: 100 * time.Millisecond})
	resp, err := f.client.Do(newRequest(t, http.MethodGet, f.url+"/v1/stream", nil))
	require.NoError(t, err)
	defer resp.Body.Close()
	// The client reads nothing: the socket buffers fill, a write waits past
	// the bound, the relay ends and the gateway request with it.
	select {
	case <-cut:
	case <-time.After(10 * time.Second):
		t.Fatal("a client that stopped reading pins the gateway request")
	}
}

func TestPassthroughIsAdmitted(t *testing.T) {
	t.Parallel()
	started, finish := make(chan struct{}, 1), make(chan struct{})
	gw, hits := startGateway(t, func(w http.ResponseWriter, r *http.Request) {
		started <- struct{}{}
		select {
		case <-finish:
		case <-r.Context().Done():
		}
	})
	cfg := config.Config{Server: config.Server{MaxConcurrentRequests: 1, RetryAfter: 2 * time.Second, ShutdownTimeout: 50 * time.Millisecond}}
	m := metrics.New()
	adm := admission.New(cfg, service.AdmissionCounters(m), slog.New(slog.DiscardHandler))
	f := startPassFront(t, gw, passOptions{admission: adm})

	first := make(chan int, 1)
	go func() {
		resp, err := f.client.Get(f.url + "/v1/models")
		if err != nil {
			first <- 0
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		first <- resp.StatusCode
	}()
	<-started
	resp, body := f.do(t, newRequest(t, http.MethodGet, f.url+"/v1/models", nil))
	assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode, body)
	assert.Equal(t, "2", resp.Header.Get("Retry-After"))
	assert.Equal(t, int32(1), hits.Load(), "the refused request never reached the gateway")

	// The shutdown's drain waits shutdown_timeout, then ends the request.
	require.NoError(t, adm.Drain(context.Background()), "the cancelled request ended")
	assert.Equal(t, http.StatusServiceUnavailable, <-first)
	assert.Equal(t, 1.0, counter(t, f.metrics, "coordinator_shutdown_cut_total", map[string]string{"api": "rest", "kind": "request"}),
		"counted as cut by the shutdown")
	resp, _ = f.do(t, newRequest(t, http.MethodGet, f.url+"/v1/models", nil))
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, "refused once draining")
	assert.Equal(t, int32(1), hits.Load())
	close(finish)
}

// counter sums the samples (counter values, histogram counts) of a metric
// family whose labels include want.
func counter(t *testing.T, m *metrics.Metrics, name string, want map[string]string) float64 {
	t.Helper()
	families, err := m.Gatherer().Gather()
	require.NoError(t, err)
	var sum float64
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, s := range f.GetMetric() {
			if hasLabels(s, want) {
				sum += s.GetCounter().GetValue() + float64(s.GetHistogram().GetSampleCount())
			}
		}
	}
	return sum
}

func hasLabels(s *dto.Metric, want map[string]string) bool {
	n := 0
	for _, l := range s.GetLabel() {
		if v, ok := want[l.GetName()]; ok && v == l.GetValue() {
			n++
		}
	}
	return n == len(want)
}
