package sim

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// benchParallelism gives 64 concurrent requests on 2 cores, the benchmark
// setup of the coordinator.
const benchParallelism = 32

func benchmarkPost(b *testing.B, h http.Handler, path, profile, body string) {
	srv := httptest.NewServer(h)
	defer srv.Close()
	tr := &http.Transport{MaxIdleConnsPerHost: 256}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	b.SetParallelism(benchParallelism)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			req, err := http.NewRequest(http.MethodPost, srv.URL+path, strings.NewReader(body))
			if err != nil {
				b.Error(err)
				return
			}
			req.Header = legHeader(profile, "bench-1")
			resp, err := client.Do(req)
			if err != nil {
				b.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				b.Errorf("status %d", resp.StatusCode)
				return
			}
		}
	})
}

func BenchmarkGateway(b *testing.B) {
	const chat = `{"model":"sim-model","messages":[{"role":"user","content":"Tell me a story."}],` +
		`"tokens":{"token_ids":[100264,882,198,41551,757,264,3446,13,100265,198,100264,78191,198]},"max_tokens":32`
	cases := []struct {
		name, path, profile, body string
	}{
		{name: "decode-chat-json", path: pathChat, profile: "decode", body: chat + `}`},
		{name: "decode-chat-stream", path: pathChat, profile: "decode", body: chat + `,"stream":true}`},
		{name: "decode-generate-stream", path: pathGenerate, profile: "decode",
			body: `{"token_ids":[1,2,3,4,5,6,7,8],"sampling_params":{"max_tokens":32},"stream":true}`},
		{name: "prefill-chat", path: pathChat, profile: "prefill", body: prefillChatBody},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			benchmarkPost(b, New(Options{Strict: true}).Gateway(), tc.path, tc.profile, tc.body)
		})
	}
}

func BenchmarkWorkerChatStream(b *testing.B) {
	benchmarkPost(b, New(Options{}).Worker(), pathChat, "",
		`{"model":"sim-model","messages":[{"role":"user","content":"Tell me a story."}],"max_tokens":32,"stream":true}`)
}

func BenchmarkRenderChat(b *testing.B) {
	s := New(Options{Strict: true})
	if _, err := sharedTokenizer(); err != nil {
		b.Fatal(err)
	}
	benchmarkPost(b, s.Render(), pathChatRender, "",
		`{"model":"sim-model","messages":[{"role":"system","content":"You are a helpful assistant."},`+
			`{"role":"user","content":"Tell me a story about a coordinator that drives requests through a pipeline."}]}`)
}
