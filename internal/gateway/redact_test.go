package gateway_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/internal/gateway"
	"github.com/coordinator-project/coordinator/internal/headers"
)

func TestRedactBody(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 51)
	deep := strings.Repeat("[", 40) + strings.Repeat("]", 40)
	tests := []struct {
		name, in, want string
	}{
		{name: "short strings stay", in: `{"model":"m","n":1}`, want: `{"model":"m","n":1}`},
		{name: "data URI", in: `{"url":"data:image/png;base64,` + long + `"}`, want: `{"url":"[base64]"}`},
		{name: "link", in: `{"url":"https://example.com/` + long + `"}`, want: `{"url":"[url]"}`},
		{name: "other long string", in: `{"text":"` + long + `"}`, want: `{"text":"..."}`},
		{name: "exactly 50 stays", in: `{"s":"` + long[:50] + `"}`, want: `{"s":"` + long[:50] + `"}`},
		{name: "long array cut", in: `[1,2,3,4,5,6,7,8,9,10,11,12]`, want: `[1,2,3,4,5,6,7,8,9,10,"... +2 more"]`},
		{name: "deep nesting cut", in: deep, want: strings.Repeat("[", 32) + `"[truncated]"` + strings.Repeat("]", 32)},
		{name: "big numbers kept exactly", in: `{"id":12345678901234567891}`, want: `{"id":12345678901234567891}`},
		{name: "not JSON, short", in: `hello`, want: `hello`},
		{name: "not JSON, long", in: strings.Repeat("z", 250), want: strings.Repeat("z", 200) + "..."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.want, gateway.RedactBody([]byte(tt.in)))
		})
	}
}

func TestRedactHeaders(t *testing.T) {
	t.Parallel()
	got := gateway.RedactHeaders(http.Header{
		"Authorization": {"Bearer secret"}, "Cookie": {"a=b"}, "X-Api-Key": {"k"}, "Proxy-Authorization": {"p"},
		"X-Auth-Token": {"t"}, "Set-Cookie": {"s"}, "X-Custom": {"one", "two"}, "X-Long": {strings.Repeat("v", 300)},
	})
	assert.Equal(t, map[string]string{
		"authorization": "[REDACTED]", "cookie": "[REDACTED]", "x-api-key": "[REDACTED]", "proxy-authorization": "[REDACTED]",
		"x-auth-token": "[REDACTED]", "set-cookie": "[REDACTED]", "x-custom": "one", "x-long": strings.Repeat("v", 256) + "...[truncated]",
	}, got)
}

func TestLegsAreLoggedOnlyAtTraceAndRedacted(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	t.Cleanup(srv.Close)
	body := []byte(`{"messages":[{"content":[{"image_url":{"url":"data:image/png;base64,` + strings.Repeat("A", 100) + `"}}]}]}`)
	for _, tc := range []struct {
		level  slog.Level
		logged bool
	}{{slog.Level(-8), true}, {slog.LevelDebug, false}} {
		var buf bytes.Buffer
		c, err := gateway.New(gateway.Options{Address: srv.URL, Log: slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: tc.level}))})
		require.NoError(t, err)
		resp, err := c.Post(context.Background(), gateway.Request{Leg: "prefill", Path: "/x", RequestID: "r",
			Header: headers.NewForwarded("authorization", "Bearer secret-token"), Body: body})
		require.NoError(t, err)
		resp.Body.Close()
		c.Close()
		out := buf.String()
		assert.NotContains(t, out, "secret-token")
		assert.NotContains(t, out, strings.Repeat("A", 100))
		if tc.logged {
			assert.Contains(t, out, `[base64]`)
			assert.Contains(t, out, `[REDACTED]`)
		} else {
			assert.Empty(t, out)
		}
	}
}
