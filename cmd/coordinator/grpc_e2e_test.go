package main

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"buf.build/gen/go/bufbuild/protovalidate/protocolbuffers/go/buf/validate"
	"buf.build/go/protovalidate"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
	"github.com/coordinator-project/coordinator/internal/headers"
	"github.com/coordinator-project/coordinator/service/apierror"
	"github.com/coordinator-project/coordinator/sim"
	"github.com/coordinator-project/coordinator/steps/steptest"
)

func chatRequest(id, body string) *coordinatorv1.GenerateRequest {
	return &coordinatorv1.GenerateRequest{RequestId: id, Input: &coordinatorv1.GenerateRequest_Openai{Openai: &coordinatorv1.OpenAIRequest{
		Endpoint: coordinatorv1.Endpoint_ENDPOINT_CHAT_COMPLETIONS, Json: []byte(body),
	}}}
}

func TestGRPCGenerate(t *testing.T) {
	t.Parallel()
	s, gw, _ := startSim(t, sim.Options{Strict: true})
	st := startStack(t, gw, "", decodeOnly)
	client := coordinatorv1.NewCoordinatorServiceClient(st.conn)

	var header metadata.MD
	ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer g", "x-tenant", "t1")
	resp, err := client.Generate(ctx, chatRequest("grpc-1", chatBody), grpc.Header(&header))
	require.NoError(t, err)
	assert.Equal(t, "grpc-1", resp.GetRequestId())
	assert.Equal(t, []string{"grpc-1"}, header.Get("x-request-id"))
	out := resp.GetOpenai()
	require.NotNil(t, out)
	assert.EqualValues(t, http.StatusOK, out.GetStatusCode())
	assert.Equal(t, "application/json", out.GetContentType())
	assert.Contains(t, string(out.GetJson()), `"chat.completion"`)

	leg := s.Legs()[0]
	assert.Equal(t, chatBody, string(leg.Body))
	assert.True(t, headers.IsLegRequestID(leg.Header.Get("X-Request-Id"), "grpc-1"))
	assert.Equal(t, "Bearer g", leg.Header.Get("Authorization"))
	assert.Equal(t, "t1", leg.Header.Get("X-Tenant"))
	assert.NotContains(t, leg.Header.Get("User-Agent"), "grpc-go", "gRPC's own metadata stays out of the legs")
}

func TestGRPCGenerateStream(t *testing.T) {
	t.Parallel()
	_, gw, _ := startSim(t, sim.Options{Strict: true})
	st := startStack(t, gw, "", decodeOnly)
	client := coordinatorv1.NewCoordinatorServiceClient(st.conn)
	stream, err := client.GenerateStream(context.Background(), &coordinatorv1.GenerateStreamRequest{
		Input: &coordinatorv1.GenerateStreamRequest_Openai{Openai: &coordinatorv1.OpenAIRequest{
			Endpoint: coordinatorv1.Endpoint_ENDPOINT_COMPLETIONS,
			Json:     []byte(`{"model":"sim-model","prompt":"x","stream":true,"max_tokens":4}`),
		}},
	})
	require.NoError(t, err)
	events := recvEvents(t, stream)
	require.GreaterOrEqual(t, len(events), 2)
	assert.Equal(t, "[DONE]", events[len(events)-1])
	assert.Contains(t, events[0], `"text_completion"`)
	md, err := stream.Header()
	require.NoError(t, err)
	assert.Len(t, md.Get("x-request-id")[0], 36)
}

func TestGRPCErrors(t *testing.T) {
	t.Parallel()
	_, gw, _ := startSim(t, sim.Options{Strict: true})
	st := startStack(t, gw, "", decodeOnly)
	client := coordinatorv1.NewCoordinatorServiceClient(st.conn)
	tests := []struct {
		name  string
		req   *coordinatorv1.GenerateRequest
		code  codes.Code
		field string
		msg   string
	}{
		{name: "no input", req: &coordinatorv1.GenerateRequest{}, code: codes.InvalidArgument, field: "input"},
		{name: "bad request id", req: chatRequest("bad id!", chatBody), code: codes.InvalidArgument, field: "request_id"},
		{name: "unspecified endpoint", req: &coordinatorv1.GenerateRequest{Input: &coordinatorv1.GenerateRequest_Openai{Openai: &coordinatorv1.OpenAIRequest{Json: []byte(chatBody)}}},
			code: codes.InvalidArgument, field: "openai.endpoint"},
		{name: "empty tokens", req: &coordinatorv1.GenerateRequest{Input: &coordinatorv1.GenerateRequest_Tokens{Tokens: &coordinatorv1.TokensRequest{Model: "m"}}},
			code: codes.InvalidArgument, field: "tokens.token_ids"},
		{name: "invalid JSON", req: chatRequest("", `{"model":`), code: codes.InvalidArgument, msg: "invalid JSON body"},
		{name: "stream body on unary", req: chatRequest("", `{"model":"sim-model","stream":true}`), code: codes.InvalidArgument, msg: "GenerateStream"},
		{name: "worker 404 carries the worker's answer", req: chatRequest("", `{"model":"nope","messages":[]}`), code: codes.NotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := client.Generate(context.Background(), tt.req)
			st := status.Convert(err)
			assert.Equal(t, tt.code, st.Code(), st.Message())
			assert.Contains(t, st.Message(), tt.msg)
			if tt.field != "" {
				var v *validate.Violations
				for _, d := range st.Details() {
					if vv, ok := d.(*validate.Violations); ok {
						v = vv
					}
				}
				require.NotNil(t, v, "violations are attached")
				require.NotEmpty(t, v.GetViolations())
				assert.Equal(t, tt.field, protovalidate.FieldPathString(v.GetViolations()[0].GetField()))
			}
			if tt.code == codes.NotFound {
				u := apierror.UpstreamDetail(st)
				require.NotNil(t, u)
				assert.EqualValues(t, 404, u.GetStatusCode())
				assert.Contains(t, string(u.GetBody()), "does not exist")
			}
		})
	}
}

// TestGRPCBodyCap: a gRPC client's OpenAI body is capped at
// server.max_request_body_size exactly, as REST's is (the message limit
// alone leaves room for the envelope).
func TestGRPCBodyCap(t *testing.T) {
	t.Parallel()
	s, gw, _ := startSim(t, sim.Options{})
	st := startStack(t, gw, "", decodeOnly) // a 1 MiB cap
	client := coordinatorv1.NewCoordinatorServiceClient(st.conn)
	prefix, suffix := `{"model":"sim-model","messages":[],"pad":"`, `"}`
	body := prefix + strings.Repeat("a", 1<<20-len(prefix)-len(suffix)) + suffix

	_, err := client.Generate(context.Background(), chatRequest("at-cap", body))
	require.NoError(t, err, "exactly at the cap")

	_, err = client.Generate(context.Background(), chatRequest("past-cap", body+" "))
	st2 := status.Convert(err)
	assert.Equal(t, codes.ResourceExhausted, st2.Code(), st2.Message())
	assert.Contains(t, st2.Message(), "request body too large: 1048577 bytes, the limit is 1048576 (request_id: past-cap)")
	for _, leg := range s.Legs() {
		assert.NotEqual(t, "past-cap", leg.Header.Get("X-Request-Id"), "a refused body reaches no leg")
	}
}

func TestGRPCHealthFollowsReadiness(t *testing.T) {
	t.Parallel()
	_, gw, _ := startSim(t, sim.Options{})
	st := startStack(t, gw, "", decodeOnly)
	resp, err := healthpb.NewHealthClient(st.conn).Check(context.Background(), &healthpb.HealthCheckRequest{Service: "coordinator.v1.CoordinatorService"})
	require.NoError(t, err)
	assert.Equal(t, healthpb.HealthCheckResponse_SERVING, resp.GetStatus())
}

// hangingGateway accepts legs and holds them until the client goes away,
// reporting each cancellation on gone.
func hangingGateway(t *testing.T) (*steptest.Gateway, <-chan struct{}) {
	gone := make(chan struct{}, 16)
	gw := steptest.NewGateway(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte("data: {\"first\":true}\n\n"))
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		gone <- struct{}{}
	})
	return gw, gone
}

func TestClientDisconnectCancelsTheLeg(t *testing.T) {
	t.Parallel()
	gw, gone := hangingGateway(t)
	st := startStack(t, gw.URL, "", decodeOnly)

	t.Run("REST", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, st.restURL+"/v1/chat/completions",
			strings.NewReader(`{"model":"m","stream":true,"messages":[]}`))
		resp, err := st.client.Do(req)
		require.NoError(t, err)
		buf := make([]byte, 64)
		n, _ := resp.Body.Read(buf)
		assert.Contains(t, string(buf[:n]), "first")
		cancel()
		resp.Body.Close()
		select {
		case <-gone:
		case <-time.After(5 * time.Second):
			t.Fatal("the decode leg was not cancelled")
		}
	})
	t.Run("gRPC", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		stream, err := coordinatorv1.NewCoordinatorServiceClient(st.conn).GenerateStream(ctx, &coordinatorv1.GenerateStreamRequest{
			Input: &coordinatorv1.GenerateStreamRequest_Openai{Openai: &coordinatorv1.OpenAIRequest{
				Endpoint: coordinatorv1.Endpoint_ENDPOINT_CHAT_COMPLETIONS, Json: []byte(`{"model":"m","stream":true}`)}},
		})
		require.NoError(t, err)
		_, err = stream.Recv()
		require.NoError(t, err)
		cancel()
		select {
		case <-gone:
		case <-time.After(5 * time.Second):
			t.Fatal("the decode leg was not cancelled")
		}
	})
}
