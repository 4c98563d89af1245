package rest

import (
	_ "embed"
	"net/http"
	"strconv"
)

// openAPIDocument is the OpenAPI 3.1 description of the REST API, served at
// GET /openapi.json. It is maintained by hand in openapi.json: the bodies
// are OpenAI and vLLM JSON objects that the coordinator passes through,
// which the generated gen/openapi/coordinator.swagger.json can only show as
// the transcoded messages' base64 `json` fields. A route added to
// NewHandler or ServeQueued belongs in it too; openapi_test.go checks that
// every documented route is served and every $ref resolves.
//
//go:embed openapi.json
var openAPIDocument []byte

// serveOpenAPI writes openAPIDocument.
func serveOpenAPI(w http.ResponseWriter, _ *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(openAPIDocument)))
	h.Set("Cache-Control", "public, max-age=300")
	_, _ = w.Write(openAPIDocument)
}
