package rest

import (
	"bufio"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// workerRoutes are the paths whose worker handlers run inference (as
// Starlette matches them, after uvicorn decoded the path once), written
// out again here rather than taken from passroute.go.
var workerRoutes = []string{
	"/v1/chat/completions", "/v1/completions", "/v1/responses", "/v1/messages",
	"/inference/v1/generate", "/invocations",
}

// FuzzPassthroughPath sends arbitrary request targets through the REST
// front's mux and passthrough to a test gateway on loopback. Whatever the
// gateway gets, its path decoded as uvicorn decodes it (%XX once, invalid
// escapes left as they are) is not an inference route, with or without
// trailing slashes, nor below one, and holds no empty, "." or ".."
// segment. No target gets a 500 (a recovered panic is one).
func FuzzPassthroughPath(f *testing.F) {
	for _, seed := range []string{
		"/v1/models", "/v1/chat%2Fcompletions", "/invocations", "/v1/%63hat/completions/", "//v1/chat/completions",
		"/v1/./chat/completions", "/x/../v1/chat/completions", "/v1/chat/completions%2F", "/%2E%2E/invocations",
		"/v1/chat/completions;x", "/V1/chat/completions", "/v1/chat/completions%00", "/v1/embeddings",
		"/inference/v1/generate//", "/v1/chat%252Fcompletions", "http://evil/invocations", "/v1/%2e/chat/completions",
		"/v1/responses/resp_1", "/tokenize?x=/v1/chat/completions", "/%69nvocations", "*", "/v1/models/", "/v1/models//",
	} {
		f.Add(uint8(0), seed)
	}
	gw, log := startGatewayLog(f)
	// The served routes answer 503 from a fake service.
	unavailable := status.Error(codes.Unavailable, "no service")
	h := newPassHandler(f, gw, passOptions{service: &fakeClient{unaryErr: unavailable, end: unavailable}})
	methods := [...]string{http.MethodPost, http.MethodGet, http.MethodPut, http.MethodOptions}

	f.Fuzz(func(t *testing.T, method uint8, target string) {
		raw := methods[int(method)%len(methods)] + " " + target + " HTTP/1.1\r\nHost: front\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
		req, err := http.ReadRequest(bufio.NewReader(strings.NewReader(raw)))
		if err != nil {
			return // the server would answer 400 itself
		}
		req.RemoteAddr = "127.0.0.1:1"
		before := log.len()
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		assert.NotEqual(t, http.StatusInternalServerError, w.Code, "%q: %s", target, w.Body)
		if log.len() == before {
			return
		}
		got, _ := log.last(t)
		path, _, _ := strings.Cut(got.RequestURI, "?")
		decoded := unquote(path)
		trimmed := strings.TrimRight(decoded, "/")
		for _, route := range workerRoutes {
			assert.False(t, trimmed == route || strings.HasPrefix(trimmed, route+"/"), "%q relayed as %q, which reaches %s", target, path, route)
		}
		segments := strings.TrimSuffix(decoded, "/") + "/" // one trailing slash is canonical
		for _, bad := range []string{"//", "/./", "/../"} {
			assert.NotContains(t, segments, bad, "%q relayed as %q", target, path)
		}
	})
}

// unquote decodes each valid %XX escape of s once, as Python's
// urllib.parse.unquote does (uvicorn), leaving invalid ones as they are.
func unquote(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]) {
			b.WriteByte(unhex(s[i+1])<<4 | unhex(s[i+2]))
			i += 2
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	}
	return c - 'a' + 10
}
