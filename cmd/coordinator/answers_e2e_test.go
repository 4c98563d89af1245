package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
	"github.com/coordinator-project/coordinator/internal/headers"
	"github.com/coordinator-project/coordinator/service/apierror"
	"github.com/coordinator-project/coordinator/sim"
)

// What the worker said reaches the client: its answer's headers (the
// decode leg's and a conditional-decode hit's, relayed errors included)
// and a leg's own error message (compat §5.2, §15 D20), over REST
// (streaming and not) and gRPC (unary and streaming), against the
// simulator.

// answer is what a client got, whichever front door it used.
type answer struct {
	status  int         // REST status; for gRPC the REST status of the code
	code    codes.Code  // gRPC only
	header  http.Header // REST headers, or gRPC header metadata as headers
	body    string      // REST body, or the gRPC status message
	message string      // the error message (REST: the OpenAI error's)
	param   string
	events  []string
	detail  *coordinatorv1.UpstreamError // gRPC only
}

// front sends one OpenAI body (stream decides the route) as a client of
// one kind would.
type front struct {
	name   string
	stream bool
	grpc   bool
}

var fronts = []front{{"REST", false, false}, {"REST stream", true, false}, {"gRPC", false, true}, {"gRPC stream", true, true}}

func (f front) body(body string) string {
	if f.stream {
		return strings.Replace(body, `{`, `{"stream":true,`, 1)
	}
	return body
}

func (f front) send(t *testing.T, st *stack, path, body string, header http.Header) answer {
	t.Helper()
	body = f.body(body)
	if !f.grpc {
		resp := st.post(t, path, body, header)
		a := answer{status: resp.StatusCode, header: resp.Header, body: readAll(t, resp.Body)}
		if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			a.events = sseData(t, strings.NewReader(a.body))
		} else if resp.StatusCode >= 400 {
			a.message, a.param = errorOf(t, a.body)
		}
		return a
	}
	md := metadata.MD{}
	for k, v := range header {
		md.Set(k, v...)
	}
	ctx := metadata.NewOutgoingContext(context.Background(), md)
	client := coordinatorv1.NewCoordinatorServiceClient(st.conn)
	endpoint := coordinatorv1.Endpoint_ENDPOINT_CHAT_COMPLETIONS
	if path == "/v1/completions" {
		endpoint = coordinatorv1.Endpoint_ENDPOINT_COMPLETIONS
	}
	in := &coordinatorv1.OpenAIRequest{Endpoint: endpoint, Json: []byte(body)}
	var a answer
	var hdr metadata.MD
	var err error
	if f.stream {
		var stream grpc.ServerStreamingClient[coordinatorv1.GenerateStreamResponse]
		stream, err = client.GenerateStream(ctx, &coordinatorv1.GenerateStreamRequest{Input: &coordinatorv1.GenerateStreamRequest_Openai{Openai: in}})
		require.NoError(t, err)
		for {
			var msg *coordinatorv1.GenerateStreamResponse
			msg, err = stream.Recv()
			if err != nil {
				break
			}
			for _, d := range msg.GetOpenai().GetData() {
				a.events = append(a.events, string(d))
			}
		}
		if errors.Is(err, io.EOF) {
			err = nil
		}
		hdr, _ = stream.Header()
	} else {
		var resp *coordinatorv1.GenerateResponse
		resp, err = client.Generate(ctx, &coordinatorv1.GenerateRequest{Input: &coordinatorv1.GenerateRequest_Openai{Openai: in}}, grpc.Header(&hdr))
		a.body = string(resp.GetOpenai().GetJson())
	}
	st0 := status.Convert(err)
	a.code, a.status = st0.Code(), apierror.HTTPStatus(st0)
	if err != nil {
		a.message, a.detail = st0.Message(), apierror.UpstreamDetail(st0)
		a.param = a.detail.GetParam()
	}
	a.header = http.Header{}
	for k, v := range hdr {
		a.header[http.CanonicalHeaderKey(k)] = v
	}
	return a
}

// errorOf decodes an OpenAI error body's message and param.
func errorOf(t *testing.T, body string) (message, param string) {
	t.Helper()
	var e struct {
		Error struct {
			Message string  `json:"message"`
			Param   *string `json:"param"`
		} `json:"error"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &e), body)
	if e.Error.Param != nil {
		param = *e.Error.Param
	}
	return e.Error.Message, param
}

// noEmptyHeaders fails on a header sent with an empty value.
func noEmptyHeaders(t *testing.T, h http.Header, what string) {
	t.Helper()
	for k, vs := range h {
		for _, v := range vs {
			assert.NotEmpty(t, v, "%s: empty %s", what, k)
		}
	}
}

func TestWorkerHeadersReachTheClient(t *testing.T) {
	t.Parallel()
	_, gw, _ := startSim(t, sim.Options{Strict: true})
	st := startStack(t, gw, "", decodeOnly)
	for _, f := range fronts {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			a := f.send(t, st, "/v1/chat/completions", chatBody, nil)
			require.Equal(t, http.StatusOK, a.status, a.message)
			assert.Equal(t, "decode", a.header.Get(sim.PoolHeader), "the worker's header")
			noEmptyHeaders(t, a.header, f.name)
			if !f.stream {
				assert.Contains(t, a.header.Get("Server-Timing"), "decode;dur=")
			} else {
				assert.NotEmpty(t, a.events)
			}

			// Over gRPC the relayed 429 is an error before any message: grpc-go
			// sends the header metadata set before it in a header frame of its
			// own ahead of the status (not trailers-only), so the client's
			// grpc.Header and stream.Header see the worker's headers.
			a = f.send(t, st, "/v1/chat/completions", chatBody, http.Header{
				sim.FaultHeader: {"decode=status:429"}, sim.RetryAfterHeader: {"7"}, "X-Request-Id": {"rid-429"},
			})
			assert.Equal(t, http.StatusTooManyRequests, a.status, a.body)
			assert.Equal(t, "7", a.header.Get("Retry-After"), "a relayed 429's Retry-After")
			assert.Equal(t, "decode", a.header.Get(sim.PoolHeader))
			assert.Empty(t, a.events)
			noEmptyHeaders(t, a.header, f.name)
			if f.grpc {
				assert.Equal(t, codes.ResourceExhausted, a.code)
				assert.Equal(t, "decode rejected the request: sim: injected fault status:429 (request_id: rid-429)", a.message)
				require.NotNil(t, a.detail)
				assert.True(t, a.detail.GetRelay())
				assert.Contains(t, string(a.detail.GetBody()), "sim: injected fault status:429")
			} else {
				assert.Equal(t, "application/json", a.header.Get("Content-Type"))
				assert.Equal(t, "sim: injected fault status:429", a.message, "the worker's own body")
				assert.Equal(t, "rid-429", a.header.Get("X-Request-Id"))
			}
		})
	}
}

// A conditional-decode hit's answer brings the worker's headers too.
func TestConditionalDecodeHitHeadersReachTheClient(t *testing.T) {
	t.Parallel()
	s, gw, _ := startSim(t, sim.Options{Strict: true})
	st := startStack(t, gw, "", `
pipeline:
  steps:
    - type: conditional-decode
    - type: decode
`)
	for i, f := range fronts {
		t.Run(f.name, func(t *testing.T) {
			body := strings.Replace(chatBody, "Hello!", "Hello "+string(rune('a'+i))+"!", 1)
			_ = f.send(t, st, "/v1/chat/completions", body, nil) // a miss: decode serves it, and the prompt is cached
			before := len(s.Legs())
			a := f.send(t, st, "/v1/chat/completions", body, nil)
			require.Equal(t, http.StatusOK, a.status, a.message)
			legs := s.Legs()[before:]
			require.Len(t, legs, 1, "a hit")
			assert.Equal(t, "if-available", legs[0].Header.Get("Prefer"))
			assert.Equal(t, "decode", a.header.Get(sim.PoolHeader))
		})
	}
}

// A render, encode or prefill 4xx with an OpenAI error object reaches the
// client with that status and the worker's message and param inside ours
// (D20); a 5xx body does not.
func TestLegErrorMessagesReachTheClient(t *testing.T) {
	t.Parallel()
	_, gw, render := startSim(t, sim.Options{Strict: true})
	cascade := startStack(t, gw, render, fullPipeline)
	pd := startStack(t, gw, "", `
pipeline:
  kv_connector: kv-nixl
  steps:
    - type: prefill
    - type: decode
`)
	image := `{"model":"sim-model","max_tokens":3,"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"` + imageURL + `"}}]}]}`
	tests := []struct {
		name    string
		st      *stack
		body    string
		header  http.Header
		status  int
		code    codes.Code
		message string
		param   string
	}{
		{name: "render 404", st: cascade, body: `{"model":"nope","messages":[{"role":"user","content":"x"}]}`,
			status: 404, code: codes.NotFound, message: "render rejected the request: The model `nope` does not exist.", param: "model"},
		{name: "encode 400", st: cascade, body: image, header: http.Header{sim.FaultHeader: {"encode=status:400"}},
			status: 400, code: codes.InvalidArgument, message: "encode[0] rejected the request: sim: injected fault status:400"},
		{name: "prefill 400", st: pd, body: `{"model":"sim-model","n":0,"messages":[{"role":"user","content":"x"}]}`,
			status: 400, code: codes.InvalidArgument, message: "prefill rejected the request: n must be between 1 and", param: "n"},
		{name: "prefill 500", st: pd, body: chatBody, header: http.Header{sim.FaultHeader: {"prefill=status:500"}},
			status: 502, code: codes.Unavailable, message: "prefill failed: HTTP 500"},
	}
	for _, tt := range tests {
		for _, f := range fronts {
			t.Run(tt.name+"/"+f.name, func(t *testing.T) {
				t.Parallel()
				h := http.Header{"X-Request-Id": {"rid-" + strings.ReplaceAll(tt.name, " ", "-")}}
				for k, v := range tt.header {
					h[k] = v
				}
				a := f.send(t, tt.st, "/v1/chat/completions", tt.body, h)
				assert.Equal(t, tt.status, a.status, a.body)
				assert.True(t, strings.HasPrefix(a.message, tt.message), "message %q", a.message)
				assert.True(t, strings.HasSuffix(a.message, " (request_id: "+h.Get("X-Request-Id")+")"), "message %q", a.message)
				assert.Equal(t, tt.param, a.param)
				assert.Empty(t, a.events)
				if tt.status >= 500 {
					assert.NotContains(t, a.message, "injected", "a 5xx body stays in the logs")
				}
				if f.grpc {
					assert.Equal(t, tt.code, a.code)
					require.NotNil(t, a.detail)
					assert.False(t, a.detail.GetRelay())
					if tt.status < 500 {
						assert.NotEmpty(t, a.detail.GetMessage())
						assert.Contains(t, a.message, a.detail.GetMessage(), "the same text in the status and the detail")
					}
				} else {
					assert.Equal(t, "application/json", a.header.Get("Content-Type"))
				}
			})
		}
	}
}

// The client's Accept reaches every leg as it sent it, streaming or not,
// and the client's query on an inference route is not read.
func TestRESTLegsCarryTheClientsAccept(t *testing.T) {
	t.Parallel()
	s, gw, _ := startSim(t, sim.Options{Strict: true})
	st := startStack(t, gw, "", decodeOnly)
	for _, f := range fronts[:2] {
		before := len(s.Legs())
		a := f.send(t, st, "/v1/chat/completions?request_id=evil&openai.endpoint=ENDPOINT_COMPLETIONS", chatBody,
			http.Header{"Accept": {"application/json"}, "X-Request-Id": {"rid-accept"}})
		require.Equal(t, http.StatusOK, a.status, a.body)
		legs := s.Legs()[before:]
		require.Len(t, legs, 1)
		assert.Equal(t, "application/json", legs[0].Header.Get("Accept"), f.name)
		assert.Equal(t, "/v1/chat/completions", legs[0].Path, f.name)
		assert.True(t, headers.IsLegRequestID(legs[0].Header.Get("X-Request-Id"), "rid-accept"), f.name)
		if f.stream {
			assert.Equal(t, "text/event-stream", a.header.Get("Content-Type"))
			assert.Equal(t, "[DONE]", a.events[len(a.events)-1])
		}
	}
}

// A streamed request the async-broker refuses gets the refusal's status
// and JSON body over REST, and its code over gRPC, not a stream.
func TestAsyncRefusalOfAStream(t *testing.T) {
	t.Parallel()
	st, _ := startBrokerStack(t, nil)
	const want = `{"error":{"message":"stream is only supported in passthrough mode","type":"invalid_request_error","code":"INVALID_REQUEST"}}`
	for _, f := range fronts[1:2] {
		a := f.send(t, st, "/v1/chat/completions", asyncChat, http.Header{"X-Ap-Mode": {"enqueue"}})
		assert.Equal(t, http.StatusBadRequest, a.status)
		assert.Equal(t, "application/json", a.header.Get("Content-Type"))
		assert.Equal(t, want, a.body, "byte for byte")
	}
	a := fronts[3].send(t, st, "/v1/chat/completions", asyncChat, http.Header{"X-Ap-Mode": {"enqueue"}})
	assert.Equal(t, codes.InvalidArgument, a.code)
	assert.Empty(t, a.events)
	require.NotNil(t, a.detail)
	assert.Equal(t, "async-broker", a.detail.GetLeg())
	assert.Equal(t, want, string(a.detail.GetBody()))
}
