package gateway_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/coordinator-project/coordinator/internal/gateway"
	"github.com/coordinator-project/coordinator/internal/headers"
)

// BenchmarkPost is a decode and a prefill leg and their answers read to the
// end, on kept connections (the httptest server's allocations included).
func BenchmarkPost(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header()["Content-Type"] = []string{"application/json"}
		_, _ = w.Write([]byte(`{"ok":true}`))
	}))
	defer srv.Close()
	c, err := gateway.New(gateway.Options{Address: srv.URL, Retry: gateway.DefaultRetry})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	legs := []gateway.Request{
		{Leg: "decode", Path: "/v1/completions", Profile: gateway.ProfileDecode, RequestID: "r-1",
			Header: headers.NewForwarded("authorization", "Bearer t"), Parts: [][]byte{[]byte(`{"model":"m",`), []byte(`"prompt":"hi"}`)}},
		{Leg: "prefill", Path: "/v1/completions", Profile: gateway.ProfilePrefill, RequestID: "r-1", Retry: true,
			Header: headers.NewForwarded("authorization", "Bearer t"), Parts: [][]byte{[]byte(`{"model":"m",`), []byte(`"prompt":"hi"}`)}},
	}
	buf := make([]byte, 64)
	for _, leg := range legs {
		b.Run(leg.Leg, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				resp, err := c.Post(context.Background(), leg)
				if err != nil {
					b.Fatal(err)
				}
				for {
					if _, err := resp.Body.Read(buf); err != nil {
						break
					}
				}
				_ = resp.Body.Close()
			}
		})
	}
}
