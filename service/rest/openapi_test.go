package rest

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/health"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
	"github.com/coordinator-project/coordinator/service/admission"
	"github.com/coordinator-project/coordinator/service/metrics"
	"github.com/coordinator-project/coordinator/steps"
)

// openAPIPaths are the routes the document must describe.
var openAPIPaths = []string{
	"/healthz",
	"/inference/v1/generate",
	"/metrics",
	"/openapi.json",
	"/readyz",
	"/v1/chat/completions",
	"/v1/completions",
	"/v1/conversations",
	"/v1/conversations/{id}",
	"/v1/conversations/{id}/items",
	"/v1/conversations/{id}/items/{item_id}",
	"/v1/messages",
	"/v1/messages/count_tokens",
	"/v1/requests/{id}",
	"/v1/responses",
	"/v1/responses/input_tokens",
	"/v1/responses/{id}",
	"/v1/responses/{id}/input_items",
}

// anyStore turns the queued-request routes on; routing never calls it.
type anyStore struct{ steps.RequestStore }

// openAPIHandler is a Handler with every route, over no client.
func openAPIHandler(t *testing.T) *Handler {
	t.Helper()
	return testHandler(t, nil, Options{Queued: anyStore{}, StoredResponses: true})
}

// testHandler is NewHandler over client with o, its Ready, Metrics and
// MaxBody (1 MiB) filled in when unset.
func testHandler(t testing.TB, client coordinatorv1.CoordinatorServiceClient, o Options) *Handler {
	t.Helper()
	if o.MaxBody == 0 {
		o.MaxBody = 1 << 20
	}
	if o.Ready == nil {
		o.Ready = admission.NewReadiness(health.NewServer())
	}
	if o.Metrics == nil {
		o.Metrics = metrics.New()
	}
	h, err := NewHandler(context.Background(), client, o)
	require.NoError(t, err)
	return h
}

// openAPIDoc is the document as served.
type openAPIDoc struct {
	OpenAPI string                                `json:"openapi"`
	Paths   map[string]map[string]json.RawMessage `json:"paths"`
}

func fetchOpenAPI(t *testing.T, h http.Handler) ([]byte, openAPIDoc) {
	t.Helper()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/openapi.json", nil))
	require.Equal(t, http.StatusOK, w.Code, w.Body.String())
	assert.Equal(t, "application/json", w.Header().Get("Content-Type"))
	var doc openAPIDoc
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &doc))
	return w.Body.Bytes(), doc
}

func TestOpenAPIDocumentListsTheRoutes(t *testing.T) {
	t.Parallel()
	_, doc := fetchOpenAPI(t, openAPIHandler(t))
	assert.True(t, strings.HasPrefix(doc.OpenAPI, "3.1."), doc.OpenAPI)
	var paths []string
	for p := range doc.Paths {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	assert.Equal(t, openAPIPaths, paths)
	for _, p := range []string{"/v1/chat/completions", "/v1/completions", "/inference/v1/generate", "/v1/responses", "/v1/messages"} {
		var op struct {
			RequestBody struct {
				Content map[string]json.RawMessage `json:"content"`
			} `json:"requestBody"`
			Responses map[string]struct {
				Content map[string]json.RawMessage `json:"content"`
			} `json:"responses"`
		}
		require.Contains(t, doc.Paths[p], "post", p)
		require.NoError(t, json.Unmarshal(doc.Paths[p]["post"], &op), p)
		assert.Contains(t, op.RequestBody.Content, "application/json", p)
		assert.Contains(t, op.Responses["200"].Content, "application/json", p)
		assert.Contains(t, op.Responses["200"].Content, "text/event-stream", p, "stream: true answers with SSE")
		assert.Contains(t, op.Responses, "400", p)
	}
	assert.Contains(t, doc.Paths["/v1/requests/{id}"], "get")
	assert.Contains(t, doc.Paths["/v1/requests/{id}"], "delete")
}

func TestOpenAPIDocumentedRoutesAreServed(t *testing.T) {
	t.Parallel()
	h := openAPIHandler(t)
	_, doc := fetchOpenAPI(t, h)
	methods := []string{"get", "post", "put", "patch", "delete"}
	for path, item := range doc.Paths {
		for method := range item {
			if !slices.Contains(methods, method) {
				continue // parameters, summary, ...
			}
			r := httptest.NewRequest(strings.ToUpper(method), strings.NewReplacer("{id}", "abc-123", "{item_id}", "msg_1").Replace(path), nil)
			_, pattern := h.mux.Handler(r)
			assert.True(t, strings.HasPrefix(pattern, strings.ToUpper(method)+" "), "%s %s is documented but not routed (%q)", method, path, pattern)
		}
	}
}

func TestOpenAPIDocumentReferencesResolve(t *testing.T) {
	t.Parallel()
	raw, _ := fetchOpenAPI(t, openAPIHandler(t))
	var doc map[string]any
	require.NoError(t, json.Unmarshal(raw, &doc))
	var refs []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				if s, ok := e.(string); ok && k == "$ref" {
					refs = append(refs, s)
				}
				walk(e)
			}
		case []any:
			for _, e := range v {
				walk(e)
			}
		}
	}
	walk(doc)
	require.NotEmpty(t, refs)
	for _, ref := range refs {
		require.True(t, strings.HasPrefix(ref, "#/"), ref)
		var node any = doc
		for _, part := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
			m, ok := node.(map[string]any)
			require.True(t, ok, ref)
			node, ok = m[part]
			require.True(t, ok, "%s does not resolve", ref)
		}
	}
}

// The streamed answers are described with their chunk schemas: each event's
// data is a chunk, the final error or [DONE].
func TestOpenAPIDocumentDescribesTheEventStreams(t *testing.T) {
	t.Parallel()
	raw, _ := fetchOpenAPI(t, openAPIHandler(t))
	var doc struct {
		Paths      map[string]map[string]json.RawMessage `json:"paths"`
		Components struct {
			Schemas map[string]struct {
				ContentMediaType string `json:"contentMediaType"`
				EventData        struct {
					OneOf []map[string]string `json:"oneOf"`
				} `json:"x-event-data"`
			} `json:"schemas"`
		} `json:"components"`
	}
	require.NoError(t, json.Unmarshal(raw, &doc))
	for path, chunk := range map[string]string{
		"/v1/chat/completions": "ChatCompletionChunk", "/v1/completions": "CompletionChunk", "/inference/v1/generate": "GenerateResponse",
	} {
		var op struct {
			Responses map[string]struct {
				Content map[string]struct {
					Schema struct {
						Ref string `json:"$ref"`
					} `json:"schema"`
				} `json:"content"`
			} `json:"responses"`
		}
		require.NoError(t, json.Unmarshal(doc.Paths[path]["post"], &op), path)
		ref := op.Responses["200"].Content["text/event-stream"].Schema.Ref
		name, ok := strings.CutPrefix(ref, "#/components/schemas/")
		require.True(t, ok, "%s: %q", path, ref)
		s, ok := doc.Components.Schemas[name]
		require.True(t, ok, ref)
		assert.Equal(t, "text/event-stream", s.ContentMediaType, path)
		assert.Equal(t, []map[string]string{
			{"$ref": "#/components/schemas/" + chunk}, {"$ref": "#/components/schemas/Error"}, {"type": "string", "const": "[DONE]"},
		}, s.EventData.OneOf, path)
	}
}
