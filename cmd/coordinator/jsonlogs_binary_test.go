package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
	"github.com/coordinator-project/coordinator/sim"
)

// outputLines collects every line a process writes to stdout and stderr.
type outputLines struct {
	mu    sync.Mutex
	lines []string
	wg    sync.WaitGroup
}

func (o *outputLines) read(r io.Reader) {
	defer o.wg.Done()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		o.mu.Lock()
		o.lines = append(o.lines, sc.Text())
		o.mu.Unlock()
	}
}

func (o *outputLines) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return strings.Join(o.lines, "\n")
}

// has reports whether a line contains every one of parts.
func (o *outputLines) has(parts ...string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, l := range o.lines {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(l, p)
		}
		if all {
			return true
		}
	}
	return false
}

// TestBinaryWritesOnlyJSONLines runs the binary at log level 5, where
// grpc-go and grpc-gateway say the most, drives a streaming REST client
// away mid-answer, a gRPC stream away mid-answer and a gRPC client with a
// bad request, stops it, and parses every line it wrote to stdout and
// stderr as JSON.
func TestBinaryWritesOnlyJSONLines(t *testing.T) {
	t.Parallel()
	bin := binary(t)
	gw := httptest.NewServer(sim.New(sim.Options{TokenDelay: 20 * time.Millisecond, OutputTokens: 200}).Gateway())
	defer gw.Close()
	restAddr, grpcAddr := freeAddr(t), freeAddr(t)
	path := filepath.Join(t.TempDir(), "coordinator.yaml")
	config := strings.Replace(binaryConfig(restAddr, grpcAddr, decodeStep), "http://127.0.0.1:1", gw.URL, 1)
	require.NoError(t, os.WriteFile(path, []byte(config), 0o600))
	cmd := exec.CommandContext(t.Context(), bin, "--config", path, "-v", "5")
	cmd.Env = append(cleanEnv(), "GRPC_GO_LOG_SEVERITY_LEVEL=info", "GRPC_GO_LOG_VERBOSITY_LEVEL=99")
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	out := &outputLines{}
	out.wg.Add(2)
	require.NoError(t, cmd.Start())
	go out.read(stdout)
	go out.read(stderr)
	require.Eventually(t, func() bool { return out.has(`"msg":"coordinator started"`) }, 30*time.Second, 10*time.Millisecond)

	// A REST stream whose client leaves after the first event.
	req, err := http.NewRequest(http.MethodPost, "http://"+restAddr+"/v1/chat/completions",
		strings.NewReader(`{"model":"sim-model","stream":true,"messages":[{"role":"user","content":"a long story"}]}`))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Request-Id", "leaves-mid-answer")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	first, err := bufio.NewReader(resp.Body).ReadString('\n')
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(first, "data: "), first)
	require.NoError(t, resp.Body.Close())

	// A gRPC stream cancelled after its first message, and a bad request.
	conn, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	client := coordinatorv1.NewCoordinatorServiceClient(conn)
	ctx, cancel := context.WithCancel(t.Context())
	stream, err := client.GenerateStream(ctx, &coordinatorv1.GenerateStreamRequest{RequestId: "grpc-leaves",
		Input: &coordinatorv1.GenerateStreamRequest_Openai{Openai: &coordinatorv1.OpenAIRequest{
			Endpoint: coordinatorv1.Endpoint_ENDPOINT_CHAT_COMPLETIONS,
			Json:     []byte(`{"model":"sim-model","stream":true,"messages":[{"role":"user","content":"another story"}]}`),
		}}})
	require.NoError(t, err)
	_, err = stream.Recv()
	require.NoError(t, err)
	cancel()
	_, err = client.Generate(t.Context(), &coordinatorv1.GenerateRequest{RequestId: "bad-request",
		Input: &coordinatorv1.GenerateRequest_Openai{Openai: &coordinatorv1.OpenAIRequest{
			Endpoint: coordinatorv1.Endpoint_ENDPOINT_CHAT_COMPLETIONS, Json: []byte(`{"model":`),
		}}})
	assert.Equal(t, codes.InvalidArgument, status.Code(err))

	require.Eventually(t, func() bool {
		return out.has(`"request_id":"leaves-mid-answer"`) && out.has(`"request_id":"grpc-leaves"`) && out.has(`"request_id":"bad-request"`)
	}, 30*time.Second, 10*time.Millisecond, "each request's own line, with its id:\n%s", out)
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	out.wg.Wait()
	require.NoError(t, cmd.Wait())

	assert.True(t, out.has(`"logger":"grpc"`), "grpc's own lines come through log at this level")
	out.mu.Lock()
	defer out.mu.Unlock()
	require.NotEmpty(t, out.lines)
	for _, l := range out.lines {
		var line map[string]any
		assert.NoError(t, json.Unmarshal([]byte(l), &line), "every line is JSON: %q", l)
	}
}
