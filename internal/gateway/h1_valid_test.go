package gateway_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/internal/gateway"
)

// TestRefusesTheRequestsNetHTTPRefuses: a header or trailer name that is
// not a token, a value with a control character or a method that is not a
// token fail the round trip before anything is sent, as with net/http's
// Transport; h1 used to send a NUL as it was and drop a bad name silently.
func TestRefusesTheRequestsNetHTTPRefuses(t *testing.T) {
	var requests atomic.Int32
	s := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
	})
	for _, tt := range []struct {
		name, want string
		edit       func(*http.Request)
	}{
		{name: "NUL in a value", want: `invalid header field value for "X-A"`, edit: func(r *http.Request) { r.Header["X-A"] = []string{"a\x00b"} }},
		{name: "LF in a value", want: `invalid header field value for "X-A"`, edit: func(r *http.Request) { r.Header["X-A"] = []string{"a\nX-B: c"} }},
		{name: "a later value", want: `invalid header field value for "X-A"`, edit: func(r *http.Request) { r.Header["X-A"] = []string{"ok", "\x7f"} }},
		{name: "space in a name", want: `invalid header field name "X A"`, edit: func(r *http.Request) { r.Header["X A"] = []string{"v"} }},
		{name: "colon in a name", want: `invalid header field name "X:A"`, edit: func(r *http.Request) { r.Header["X:A"] = []string{"v"} }},
		{name: "empty name", want: `invalid header field name ""`, edit: func(r *http.Request) { r.Header[""] = []string{"v"} }},
		{name: "a trailer", want: `invalid trailer field value for "X-T"`, edit: func(r *http.Request) { r.Trailer = http.Header{"X-T": {"\r"}} }},
		{name: "method", want: `invalid method "PO ST"`, edit: func(r *http.Request) { r.Method = "PO ST" }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for _, tr := range []http.RoundTripper{&http.Transport{}, &gateway.HTTP1Transport{}} {
				req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, s.URL, strings.NewReader("{}"))
				require.NoError(t, err)
				tt.edit(req)
				_, err = tr.RoundTrip(req)
				if assert.ErrorContains(t, err, tt.want, "%T", tr) {
					assert.NotContains(t, err.Error(), "a\x00b", "a value is not quoted: it may be a secret")
				}
			}
		})
	}
	assert.Zero(t, requests.Load(), "nothing reached the server")
}
