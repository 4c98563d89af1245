package main

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/cmd/internal/procs"
)

// binaryConfig is a config that starts without a reachable gateway.
func binaryConfig(restAddr, grpcAddr, extra string) string {
	return fmt.Sprintf(`server:
  listen_addr: %q
  grpc_listen_addr: %q
gateway:
  address: "http://127.0.0.1:1"
%s`, restAddr, grpcAddr, extra)
}

const decodeStep = "pipeline:\n  steps:\n    - type: decode\n"

// runBinary runs the coordinator on config with args until it exits (a
// failed start) and returns its stderr and exit code.
func runBinary(t *testing.T, bin, config string, env []string, args ...string) (stderr string, code int) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "coordinator.yaml")
	require.NoError(t, os.WriteFile(path, []byte(config), 0o600))
	cmd := exec.CommandContext(t.Context(), bin, append([]string{"--config", path}, args...)...)
	cmd.Env = append(cleanEnv(), env...)
	var errBuf bytes.Buffer
	cmd.Stderr = &errBuf
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil {
		require.ErrorAs(t, err, &exit)
		return errBuf.String(), exit.ExitCode()
	}
	return errBuf.String(), 0
}

// cleanEnv is the test's environment without COORDINATOR_* and OTEL_*
// variables, which would change what the binary does.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "COORDINATOR_") && !strings.HasPrefix(kv, "OTEL_") {
			env = append(env, kv)
		}
	}
	return env
}

// takenPort is a 127.0.0.1 address another listener holds for the test.
func takenPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	return l.Addr().String()
}

func freeAddr(t *testing.T) string {
	t.Helper()
	addr, err := procs.FreeAddr()
	require.NoError(t, err)
	return addr
}

// binary builds the coordinator into a directory of t's.
func binary(t *testing.T) string {
	t.Helper()
	bin, _, err := procs.Build(t.Context(), t.TempDir())
	require.NoError(t, err)
	return bin
}

// TestBinaryStartFailuresSayWhy builds the real binary and starts it the
// ways an operator gets wrong: each failure is one line on stderr naming
// the key and the cause, at every log level, and exit status 1.
func TestBinaryStartFailuresSayWhy(t *testing.T) {
	t.Parallel()
	bin := binary(t)
	taken := takenPort(t)
	missing := filepath.Join(t.TempDir(), "missing.pem")
	tests := []struct {
		name   string
		config string
		env    []string
		want   string
	}{
		{
			name:   "rest port taken",
			config: binaryConfig(taken, freeAddr(t), decodeStep),
			want:   "coordinator: start: server.listen_addr: listen tcp " + taken + ": bind: address already in use",
		},
		{
			name:   "grpc port taken",
			config: binaryConfig(freeAddr(t), taken, decodeStep),
			want:   "coordinator: start: server.grpc_listen_addr: listen tcp " + taken + ": bind: address already in use",
		},
		{
			name: "TLS file missing",
			config: strings.Replace(binaryConfig(freeAddr(t), freeAddr(t), decodeStep), "server:\n",
				fmt.Sprintf("server:\n  tls: {cert_file: %q, key_file: %q}\n", missing, missing), 1),
			want: "coordinator: server.tls.cert_file: open " + missing + ": no such file or directory",
		},
		{
			name:   "OTLP protocol not supported",
			config: binaryConfig(freeAddr(t), freeAddr(t), decodeStep),
			env:    []string{"OTEL_TRACES_EXPORTER=otlp", "OTEL_EXPORTER_OTLP_PROTOCOL=http/json"},
			want:   `coordinator: OTEL_EXPORTER_OTLP_PROTOCOL: must be "grpc" or "http/protobuf", got "http/json"`,
		},
		{
			name:   "sampler unknown",
			config: binaryConfig(freeAddr(t), freeAddr(t), decodeStep+"tracing: {enabled: true}\n"),
			env:    []string{"OTEL_TRACES_SAMPLER=sometimes"},
			want:   `coordinator: OTEL_TRACES_SAMPLER: "sometimes" is not supported`,
		},
		{
			name:   "unknown config key",
			config: binaryConfig(freeAddr(t), freeAddr(t), decodeStep+"servr: {}\n"),
			want:   `coordinator: config `,
		},
		{
			name: "redis unreachable",
			config: binaryConfig(freeAddr(t), freeAddr(t), "pipeline:\n  steps:\n    - type: async-broker\n      params:\n        redis_url: redis://"+
				freeAddr(t)+"\n    - type: decode\n"),
			want: "coordinator: start: pipeline.steps[0] (async-broker): redis_url: redis at ",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			for _, v := range []string{"1", "2", "3"} {
				stderr, code := runBinary(t, bin, tt.config, tt.env, "-v", v)
				assert.Equal(t, 1, code, "-v %s: %s", v, stderr)
				assert.Equal(t, 1, strings.Count(stderr, "\n"), "-v %s: one line: %q", v, stderr)
				assert.True(t, strings.HasPrefix(stderr, tt.want), "-v %s: %q starts with %q", v, stderr, tt.want)
			}
			// At debug level fx logs its events too; the line still ends stderr.
			stderr, code := runBinary(t, bin, tt.config, tt.env, "-v", "4")
			assert.Equal(t, 1, code, stderr)
			lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
			assert.True(t, strings.HasPrefix(lines[len(lines)-1], tt.want), "-v 4: %q", stderr)
		})
	}
}

// TestBinaryLogsOneLineAtStartAndAtStop runs the binary through a start,
// a request in flight at SIGTERM, and a clean stop: stderr holds the start
// line (listen addresses, pipeline) and the stop line (drained requests,
// duration), nothing else at the default log level but the request's own
// line and the drain's start, and the exit status is 0.
func TestBinaryLogsOneLineAtStartAndAtStop(t *testing.T) {
	t.Parallel()
	bin := binary(t)
	arrived, release := make(chan struct{}), make(chan struct{})
	gw := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		<-release
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"choices":[]}`)
	}))
	defer gw.Close()
	restAddr, grpcAddr := freeAddr(t), freeAddr(t)
	config := strings.Replace(binaryConfig(restAddr, grpcAddr, decodeStep), "http://127.0.0.1:1", gw.URL, 1)
	cmd, started, lines := startBinary(t, bin, config, nil)
	assert.Equal(t, restAddr, started["rest"])
	assert.Equal(t, grpcAddr, started["grpc"])
	assert.Equal(t, "decode", started["pipeline"])
	assert.Equal(t, "off", started["tracing"])

	answered := make(chan int, 1)
	go func() {
		resp, err := http.Post("http://"+restAddr+"/v1/chat/completions", "application/json",
			strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
		if err != nil {
			answered <- 0
			return
		}
		resp.Body.Close()
		answered <- resp.StatusCode
	}()
	<-arrived
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	require.Eventually(t, func() bool { // the stop hook counted the request in flight
		resp, err := http.Get("http://" + restAddr + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusServiceUnavailable
	}, 10*time.Second, 10*time.Millisecond)
	close(release)
	assert.Equal(t, http.StatusOK, <-answered, "the request in flight at the signal is served")

	var rest []map[string]any
	for line := range lines {
		rest = append(rest, line)
	}
	require.NoError(t, cmd.Wait(), "a clean stop exits 0")
	require.Len(t, rest, 3, "the drain's start, the request's line and the stop line: %v", rest)
	assert.Equal(t, "draining", rest[0]["msg"])
	assert.Equal(t, "request done", rest[1]["msg"])
	stopped := rest[2]
	assert.Equal(t, "coordinator stopped", stopped["msg"])
	assert.Equal(t, "terminated", stopped["signal"])
	assert.InDelta(t, 1, stopped["drained"], 0, "one request in flight at the signal")
	assert.Positive(t, stopped["duration"])
}
