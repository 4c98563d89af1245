package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
	"github.com/coordinator-project/coordinator/sim"
)

// TestGRPCDeclaredBodyCap: a call whose content-length metadata declares
// more than the gRPC message limit (server.max_request_body_size plus the
// envelope's 1 MiB, plus the 5-byte frame prefix) is refused from its
// metadata, a stream before its message is read: RESOURCE_EXHAUSTED, as a
// body past the cap, with a BadRequest naming content-length, and no leg.
// A declaration within the limit, or one that is not a number, is no
// reason to refuse.
func TestGRPCDeclaredBodyCap(t *testing.T) {
	t.Parallel()
	s, gw, _ := startSim(t, sim.Options{})
	st := startStack(t, gw, "", decodeOnly) // a 1 MiB cap
	client := coordinatorv1.NewCoordinatorServiceClient(st.conn)
	const limit = 2<<20 + 5
	streamBody := `{"model":"sim-model","stream":true,"messages":[{"role":"user","content":"hi"}]}`
	calls := map[string]func(ctx context.Context, id string) error{
		"Generate": func(ctx context.Context, id string) error {
			_, err := client.Generate(ctx, chatRequest(id, chatBody))
			return err
		},
		"GenerateStream": func(ctx context.Context, id string) error {
			stream, err := client.GenerateStream(ctx, &coordinatorv1.GenerateStreamRequest{RequestId: id,
				Input: &coordinatorv1.GenerateStreamRequest_Openai{Openai: &coordinatorv1.OpenAIRequest{
					Endpoint: coordinatorv1.Endpoint_ENDPOINT_CHAT_COMPLETIONS, Json: []byte(streamBody)}}})
			if err != nil {
				return err
			}
			for {
				if _, err := stream.Recv(); err != nil {
					if errors.Is(err, io.EOF) {
						return nil
					}
					return err
				}
			}
		},
		"GenerateStream tokens": func(ctx context.Context, id string) error {
			stream, err := client.GenerateStream(ctx, &coordinatorv1.GenerateStreamRequest{RequestId: id,
				Input: &coordinatorv1.GenerateStreamRequest_Tokens{Tokens: &coordinatorv1.TokensRequest{Model: sim.DefaultModel, TokenIds: []uint32{1, 2}}}})
			if err != nil {
				return err
			}
			for {
				if _, err := stream.Recv(); err != nil {
					if errors.Is(err, io.EOF) {
						return nil
					}
					return err
				}
			}
		},
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			for _, declared := range []int64{1e12, limit + 1} {
				id := fmt.Sprintf("declared-%d-%d", declared, len(name))
				// A stream is refused before its message, and its request id, are
				// read: it carries x-request-id's.
				ctx := metadata.AppendToOutgoingContext(context.Background(), "content-length", strconv.FormatInt(declared, 10), "x-request-id", id)
				st := status.Convert(call(ctx, id))
				require.Equal(t, codes.ResourceExhausted, st.Code(), "%s: %v", id, st.Message())
				assert.Equal(t, fmt.Sprintf("request body too large: content-length %d exceeds the limit of %d bytes (request_id: %s)", declared, limit, id), st.Message())
				var violation *errdetails.BadRequest_FieldViolation
				for _, d := range st.Details() {
					if br, ok := d.(*errdetails.BadRequest); ok && len(br.GetFieldViolations()) == 1 {
						violation = br.GetFieldViolations()[0]
					}
				}
				require.NotNil(t, violation, "a BadRequest detail: %v", st.Details())
				assert.Equal(t, "content-length", violation.GetField())
				for _, leg := range s.Legs() {
					assert.NotEqual(t, id, leg.Header.Get("X-Request-Id"), "a refused call reaches no leg")
				}
			}
			for _, declared := range []string{strconv.Itoa(limit), "many"} {
				ctx := metadata.AppendToOutgoingContext(context.Background(), "content-length", declared)
				assert.NoError(t, call(ctx, "declared-ok"), declared)
			}
		})
	}
}

// TestRESTDeclaredBodyCapThroughTheApp: the app's own HTTP server (h2c,
// its timeouts) answers an inference request announcing a terabyte with
// Expect: 100-continue by the 413 at once, never a 100 Continue, and
// closes the connection; the request reaches no leg.
func TestRESTDeclaredBodyCapThroughTheApp(t *testing.T) {
	t.Parallel()
	s, gw, _ := startSim(t, sim.Options{})
	st := startStack(t, gw, "", decodeOnly) // a 1 MiB cap
	conn, err := net.Dial("tcp", strings.TrimPrefix(st.restURL, "http://"))
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, conn.SetDeadline(time.Now().Add(10*time.Second)))
	_, err = io.WriteString(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: coordinator\r\nContent-Type: application/json\r\n"+
		"X-Request-Id: terabyte\r\nContent-Length: 1000000000000\r\nExpect: 100-continue\r\n\r\n")
	require.NoError(t, err)
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	require.NoError(t, err)
	body := readAll(t, resp.Body)
	require.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, body)
	assert.True(t, resp.Close)
	msg, _, code := openAIError(t, body)
	assert.Equal(t, http.StatusRequestEntityTooLarge, code)
	assert.Equal(t, "request body too large: content-length 1000000000000 exceeds the limit of 1048576 bytes (request_id: terabyte)", msg)
	_, err = br.ReadByte()
	assert.ErrorIs(t, err, io.EOF, "the connection closes")
	assert.Empty(t, s.Legs())
	assert.Equal(t, "1", st.scrape(t, `coordinator_requests_total{api="rest",endpoint="chat",status="413"}`))
}
