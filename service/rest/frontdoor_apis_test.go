package rest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
	"github.com/coordinator-project/coordinator/internal/wire/legs"
	"github.com/coordinator-project/coordinator/service"
	"github.com/coordinator-project/coordinator/service/admission"
	"github.com/coordinator-project/coordinator/service/metrics"
	"github.com/coordinator-project/coordinator/service/rest"
)

// The recipe "add a front-door API" of CONTRIBUTING.md: an API is one
// coordinatorv1.Endpoint value and the places that serve it. For every
// value but UNSPECIFIED, this test holds them together, each failure
// naming the place that lacks it:
//   - service.FormatOf maps it to a legs.Format of its own, which has a
//     name (String) and a worker path (Path) of its own;
//   - the REST front serves POST <path> (a handleInference line in
//     service/rest/handler.go) and hands it, with this endpoint, to
//     Generate and, with "stream": true, to GenerateStream (the post and
//     ":stream" bindings of proto/coordinator/v1/coordinator.proto);
//   - openapi.json describes POST <path>;
//   - the metrics' endpoint label values include the format's name, so its
//     series start at 0 (service/metrics).
func TestEveryEndpointIsServedEverywhere(t *testing.T) {
	t.Parallel()
	endpoints := frontDoorEndpoints()
	require.NotEmpty(t, endpoints)

	formats := map[legs.Format]coordinatorv1.Endpoint{}
	paths := map[string]coordinatorv1.Endpoint{}
	for _, e := range endpoints {
		f := service.FormatOf(e)
		if other, dup := formats[f]; dup {
			t.Errorf("service.FormatOf(%s) = %s, the format of %s too: add a case to FormatOf (service/coordinator.go) and a Format to internal/wire/legs/format.go", e, f, other)
		}
		formats[f] = e
		assert.NotEqual(t, "unknown", f.String(), "legs.Format(%d).String() for %s: name it in internal/wire/legs/format.go", f, e)
		p := f.Path()
		if !assert.True(t, strings.HasPrefix(p, "/"), "%s: legs.Format(%d).Path() = %q: give it a worker path in internal/wire/legs/format.go", e, f, p) {
			continue
		}
		if other, dup := paths[p]; dup {
			t.Errorf("%s posts to %s, the path of %s: give its Format a path of its own in Format.Path (internal/wire/legs/format.go)", e, p, other)
		}
		paths[p] = e
	}

	h := newAPIFront(t, &endpointRecorder{})
	documented := openAPIPosts(t, h)
	scrape := frontGet(t, h, "/metrics") // before any request: the series that start at 0
	for _, e := range endpoints {
		f := service.FormatOf(e)
		assert.Contains(t, documented, f.Path(), "%s: openapi.json has no POST %s: describe it in service/rest/openapi.json", e, f.Path())
		for _, series := range []string{
			fmt.Sprintf(`coordinator_requests_total{api="rest",endpoint=%q,status="200"} 0`, f.String()),
			fmt.Sprintf(`coordinator_requests_total{api="grpc",endpoint=%q,status="OK"} 0`, f.String()),
		} {
			assert.True(t, strings.Contains(scrape, series), "%s: /metrics lacks %s: add %q to the endpoints of service/metrics/metrics.go", e, series, f.String())
		}
	}

	for _, e := range endpoints {
		t.Run(e.String(), func(t *testing.T) {
			t.Parallel()
			servesEndpoint(t, e)
		})
	}
}

// servesEndpoint posts a body of e's API to its route, as is and with
// "stream": true, and checks that Generate and GenerateStream got it with
// e as its endpoint.
func servesEndpoint(t *testing.T, e coordinatorv1.Endpoint) {
	path := service.FormatOf(e).Path()
	fake := &endpointRecorder{}
	h := newAPIFront(t, fake)

	w := frontPost(h, path, `{"model":"m"}`)
	got, called := fake.unaryEndpoint()
	require.True(t, called, "POST %s: %d %s: nothing reached Generate: serve it with "+
		"h.handleInference(%q, coordinatorv1.Endpoint_%s) in service/rest/handler.go and a post binding of Generate in proto/coordinator/v1/coordinator.proto",
		path, w.Code, w.Body.String(), "POST "+path, e)
	assert.Equal(t, e, got, "POST %s reached Generate as another endpoint: service.FormatOf and the handleInference line of service/rest/handler.go disagree", path)
	assert.Equal(t, http.StatusOK, w.Code, w.Body.String())
	assert.Equal(t, `{"answered":true}`, w.Body.String())

	w = frontPost(h, path, `{"model":"m","stream":true}`)
	got, called = fake.streamEndpoint()
	require.True(t, called, "POST %s with \"stream\": true: %d %s: nothing reached GenerateStream: add the %q binding of GenerateStream in proto/coordinator/v1/coordinator.proto",
		path, w.Code, w.Body.String(), path+":stream")
	assert.Equal(t, e, got, "POST %s (stream) reached GenerateStream as another endpoint: service.FormatOf and the handleInference line of service/rest/handler.go disagree", path)
	assert.Equal(t, http.StatusOK, w.Code, w.Body.String())
	assert.Contains(t, w.Body.String(), `{"answered":true}`)
}

// frontDoorEndpoints are the Endpoint values but UNSPECIFIED, in number
// order.
func frontDoorEndpoints() []coordinatorv1.Endpoint {
	var out []coordinatorv1.Endpoint
	for n := range coordinatorv1.Endpoint_name {
		if e := coordinatorv1.Endpoint(n); e != coordinatorv1.Endpoint_ENDPOINT_UNSPECIFIED {
			out = append(out, e)
		}
	}
	slices.Sort(out)
	return out
}

// newAPIFront is the REST front over fake.
func newAPIFront(t *testing.T, fake *endpointRecorder) *rest.Handler {
	t.Helper()
	h, err := rest.NewHandler(context.Background(), fake, rest.Options{MaxBody: 1 << 20, Ready: admission.NewReadiness(health.NewServer()), Metrics: metrics.New()})
	require.NoError(t, err)
	return h
}

func frontPost(h http.Handler, path, body string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func frontGet(t *testing.T, h http.Handler, path string) string {
	t.Helper()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
	require.Equal(t, http.StatusOK, w.Code, "GET %s: %s", path, w.Body.String())
	return w.Body.String()
}

// openAPIPosts are the paths openapi.json, as served, describes a POST of.
func openAPIPosts(t *testing.T, h http.Handler) []string {
	t.Helper()
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	require.NoError(t, json.Unmarshal([]byte(frontGet(t, h, "/openapi.json")), &doc))
	var out []string
	for p, ops := range doc.Paths {
		if _, ok := ops["post"]; ok {
			out = append(out, p)
		}
	}
	return out
}

// endpointRecorder is CoordinatorService as the REST front's gateway calls it:
// it notes the endpoint of each call and answers {"answered":true}.
type endpointRecorder struct {
	mu     sync.Mutex
	unary  []coordinatorv1.Endpoint
	stream []coordinatorv1.Endpoint
}

func (f *endpointRecorder) unaryEndpoint() (coordinatorv1.Endpoint, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.unary) != 1 {
		return 0, false
	}
	return f.unary[0], true
}

func (f *endpointRecorder) streamEndpoint() (coordinatorv1.Endpoint, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.stream) != 1 {
		return 0, false
	}
	return f.stream[0], true
}

func (f *endpointRecorder) Generate(_ context.Context, in *coordinatorv1.GenerateRequest, _ ...grpc.CallOption) (*coordinatorv1.GenerateResponse, error) {
	f.mu.Lock()
	f.unary = append(f.unary, in.GetOpenai().GetEndpoint())
	f.mu.Unlock()
	return &coordinatorv1.GenerateResponse{Output: &coordinatorv1.GenerateResponse_Openai{Openai: &coordinatorv1.OpenAIResponse{
		StatusCode: http.StatusOK, ContentType: "application/json", Json: []byte(`{"answered":true}`)}}}, nil
}

func (f *endpointRecorder) GenerateStream(ctx context.Context, in *coordinatorv1.GenerateStreamRequest, _ ...grpc.CallOption) (grpc.ServerStreamingClient[coordinatorv1.GenerateStreamResponse], error) {
	f.mu.Lock()
	f.stream = append(f.stream, in.GetOpenai().GetEndpoint())
	f.mu.Unlock()
	return &oneEventStream{ctx: ctx}, nil
}

func (*endpointRecorder) CountTokens(context.Context, *coordinatorv1.CountTokensRequest, ...grpc.CallOption) (*coordinatorv1.CountTokensResponse, error) {
	return nil, status.Error(codes.Unimplemented, "not in this test")
}

func (*endpointRecorder) GetRequest(context.Context, *coordinatorv1.GetRequestRequest, ...grpc.CallOption) (*coordinatorv1.GetRequestResponse, error) {
	return nil, status.Error(codes.Unimplemented, "not in this test")
}

func (*endpointRecorder) DeleteRequest(context.Context, *coordinatorv1.DeleteRequestRequest, ...grpc.CallOption) (*coordinatorv1.DeleteRequestResponse, error) {
	return nil, status.Error(codes.Unimplemented, "not in this test")
}

// oneEventStream is a stream of one event, {"answered":true}.
type oneEventStream struct {
	grpc.ClientStream
	ctx  context.Context
	sent bool
}

func (s *oneEventStream) Recv() (*coordinatorv1.GenerateStreamResponse, error) {
	if s.sent {
		return nil, io.EOF
	}
	s.sent = true
	return &coordinatorv1.GenerateStreamResponse{Chunk: &coordinatorv1.GenerateStreamResponse_Openai{
		Openai: &coordinatorv1.OpenAIEvents{Data: [][]byte{[]byte(`{"answered":true}`)}}}}, nil
}

func (*oneEventStream) Header() (metadata.MD, error) { return metadata.MD{}, nil }
func (*oneEventStream) Trailer() metadata.MD         { return nil }
func (s *oneEventStream) Context() context.Context   { return s.ctx }

var _ coordinatorv1.CoordinatorServiceClient = (*endpointRecorder)(nil)
