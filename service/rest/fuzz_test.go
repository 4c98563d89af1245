package rest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"

	"github.com/coordinator-project/coordinator/connectors/ec"
	"github.com/coordinator-project/coordinator/connectors/kv"
	"github.com/coordinator-project/coordinator/service"
	"github.com/coordinator-project/coordinator/service/admission"
	"github.com/coordinator-project/coordinator/service/config"
	"github.com/coordinator-project/coordinator/service/logging"
	"github.com/coordinator-project/coordinator/service/rest"
	"github.com/coordinator-project/coordinator/service/tracing"
	"github.com/coordinator-project/coordinator/sim"
	"github.com/coordinator-project/coordinator/steps/builtin"
)

// fuzzRoutes are the REST routes that run the pipeline; the fuzz input's
// route byte picks one.
var fuzzRoutes = [...]string{"/v1/chat/completions", "/v1/completions", "/inference/v1/generate"}

// fuzzDeadline bounds one input's round trip: no input may hang.
const fuzzDeadline = 10 * time.Second

// FuzzRESTBody posts arbitrary bodies to the three inference routes of the
// real coordinator (REST front, in-process gRPC, interceptors, the full
// cascade: render, conditional-decode, encode, prefill, decode with the NIXL
// connectors) in front of the simulator, over loopback (seeds here and in
// testdata/fuzz/FuzzRESTBody). Every input gets an answer within
// fuzzDeadline: 200, or a 4xx or 502/503/504 with an OpenAI error object
// ({"error":{"message":...}}); never a 500 of the coordinator's own (a
// recovered panic is one).
func FuzzRESTBody(f *testing.F) {
	const img = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8/5+hHgAHggJ/PchI7wAAAABJRU5ErkJggg=="
	for _, seed := range []struct {
		route uint8
		body  string
	}{
		{0, `{"model":"sim-model","messages":[{"role":"user","content":"Hello!"}],"max_tokens":4}`},
		{0, `{"model":"sim-model","stream":true,"max_tokens":3,"messages":[{"role":"user","content":[{"type":"text","text":"What is it?"},{"type":"image_url","image_url":{"url":"` + img + `"}}]}]}`},
		{0, `{"model":"sim-model","messages":[],"stream":"yes"}`},
		{0, `{"model":"sim-model","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"http://127.0.0.1:1/x.png"}}]}]}`},
		{0, `{"model":"sim-model","messages":"hi","stream":false,"stream":true}`},
		{1, `{"model":"sim-model","prompt":"Say hi","max_tokens":3}`},
		{1, `{"model":"sim-model","prompt":[9906,1917,4294967295],"max_tokens":2,"stream":true}`},
		{1, `{"model":"sim-model","prompt":[1,-1,2.5,4294967296,"x",[1]]}`},
		{1, `{"model":"sim-model","prompt":["a","b"]}`},
		{1, `{"model":"sim-model","prompt":null,"max_tokens":1e400}`},
		{2, `{"model":"sim-model","token_ids":[1,2,3],"sampling_params":{"max_tokens":3}}`},
		{2, `{"model":"sim-model","token_ids":[1,2,3],"stream":true,"sampling_params":{"max_tokens":2,"extra_args":{"kv_transfer_params":{"x":1}}}}`},
		{2, `{"token_ids":[1,2],"features":{"mm_hashes":{"image":["h"]},"mm_placeholders":{"image":[{"offset":1,"length":5}]}}}`},
		{2, `{"token_ids":[],"sampling_params":[]}`},
		{2, "{\"token_ids\":[1],\"x\":\"\xff\"}"},
		{0, strings.Repeat("[", 100) + strings.Repeat("]", 100)},
		{0, `{"a":` + strings.Repeat("[", 600) + strings.Repeat("]", 600) + `}`},
		{0, ``}, {1, `null`}, {2, `[]`}, {0, `{"model":"nope","messages":[]}`},
	} {
		f.Add(seed.route, []byte(seed.body))
	}
	url := startFuzzStack(f)
	client := &http.Client{Timeout: fuzzDeadline, Transport: &http.Transport{}}
	f.Cleanup(client.CloseIdleConnections)

	f.Fuzz(func(t *testing.T, route uint8, body []byte) {
		start := time.Now()
		resp, err := client.Post(url+fuzzRoutes[int(route)%len(fuzzRoutes)], "application/json", bytes.NewReader(body))
		require.NoError(t, err, "no answer within %v", fuzzDeadline)
		answer, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err, "the answer is cut")
		require.Less(t, time.Since(start), fuzzDeadline)
		checkAnswer(t, resp, answer)
	})
}

// checkAnswer holds an answer to FuzzRESTBody's properties.
func checkAnswer(t *testing.T, resp *http.Response, answer []byte) {
	t.Helper()
	code := resp.StatusCode
	if code == http.StatusOK {
		if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			assert.True(t, bytes.HasSuffix(answer, []byte("\n\n")), "a stream ends with a whole event: %q", answer)
		} else {
			assert.True(t, json.Valid(answer), "a JSON answer: %q", answer)
		}
		return
	}
	assert.True(t, code >= 400 && code < 500 || code >= 502 && code <= 504, "status %d: %s", code, answer)
	assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	var e struct {
		Error struct {
			Message *string `json:"message"`
		} `json:"error"`
	}
	require.NoError(t, json.Unmarshal(answer, &e), "an OpenAI error object: %q", answer)
	require.NotNil(t, e.Error.Message, "an OpenAI error object: %q", answer)
}

// startFuzzStack starts the simulator and the coordinator app (every module
// the command wires) with the full cascade, and returns the REST base URL.
// Image downloads may only name 127.0.0.1, which the download guard then
// refuses: a fuzzed URL never leads to a name lookup or a connection.
func startFuzzStack(f *testing.F) string {
	s := sim.New(sim.Options{})
	gw := httptest.NewServer(s.Gateway())
	f.Cleanup(gw.Close)
	render := httptest.NewServer(s.Render())
	f.Cleanup(render.Close)
	cfg, err := config.Parse([]byte(`
log_level: 1
server:
  listen_addr: "127.0.0.1:0"
  grpc_listen_addr: "127.0.0.1:0"
  max_request_body_size: 1
gateway:
  address: "`+gw.URL+`"
pipeline:
  kv_connector: kv-nixl
  ec_connector: ec-nixl
  steps:
    - type: replace-media-urls
      params:
        allowed_domains: ["127.0.0.1"]
    - type: render
      params:
        address: "`+render.URL+`"
    - type: conditional-decode
    - type: encode
    - type: prefill
    - type: decode
`), func(string) (string, bool) { return "", false })
	require.NoError(f, err)
	var addrs *service.Addresses
	app := fxtest.New(f,
		fx.Supply(cfg, logging.NewLogger(io.Discard, cfg.LogLevel)),
		fx.NopLogger,
		kv.Module, ec.Module, builtin.Module, admission.Module, tracing.Module, service.Module, rest.Module,
		fx.Invoke(func(r *admission.Readiness) { r.Set(true) }),
		fx.Populate(&addrs),
	)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(f, app.Start(ctx))
	f.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = app.Stop(ctx)
	})
	return "http://" + addrs.REST()
}
