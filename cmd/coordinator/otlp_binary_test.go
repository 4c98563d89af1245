package main

import (
	"bufio"
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
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/coordinator-project/coordinator/sim"
)

// otlpReceiver is an OTLP/HTTP collector on loopback: it decodes every
// ExportTraceServiceRequest and answers with status (200 accepts).
type otlpReceiver struct {
	*httptest.Server
	mu       sync.Mutex
	paths    []string
	apiKeys  []string
	resource map[string]string
	spans    []*tracepb.Span
}

func startOTLPReceiver(t *testing.T, status int) *otlpReceiver {
	t.Helper()
	rcv := &otlpReceiver{resource: map[string]string{}}
	rcv.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		var req collectortrace.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(body, &req)
		}
		rcv.mu.Lock()
		rcv.paths = append(rcv.paths, r.URL.Path)
		rcv.apiKeys = append(rcv.apiKeys, r.Header.Get("X-Api-Key"))
		for _, rs := range req.GetResourceSpans() {
			for _, kv := range rs.GetResource().GetAttributes() {
				rcv.resource[kv.GetKey()] = kv.GetValue().GetStringValue()
			}
			for _, ss := range rs.GetScopeSpans() {
				rcv.spans = append(rcv.spans, ss.GetSpans()...)
			}
		}
		rcv.mu.Unlock()
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(status)
		if status == http.StatusOK {
			out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
			_, _ = w.Write(out)
		}
	}))
	t.Cleanup(rcv.Close)
	return rcv
}

// span is the received span named name, nil if none yet.
func (r *otlpReceiver) span(name string) *tracepb.Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range r.spans {
		if s.GetName() == name {
			return s
		}
	}
	return nil
}

func (r *otlpReceiver) spanByID(id []byte) *tracepb.Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range r.spans {
		if string(s.GetSpanId()) == string(id) {
			return s
		}
	}
	return nil
}

func otlpAttrs(kvs []*commonpb.KeyValue) map[string]*commonpb.AnyValue {
	m := map[string]*commonpb.AnyValue{}
	for _, kv := range kvs {
		m[kv.GetKey()] = kv.GetValue()
	}
	return m
}

// startBinary starts the coordinator binary on config with env and waits
// for its start line, which it returns; the lines that follow come on the
// channel.
func startBinary(t *testing.T, bin, config string, env []string) (*exec.Cmd, map[string]any, <-chan map[string]any) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "coordinator.yaml")
	require.NoError(t, os.WriteFile(path, []byte(config), 0o600))
	cmd := exec.CommandContext(t.Context(), bin, "--config", path)
	cmd.Env = append(cleanEnv(), env...)
	pipe, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	lines := make(chan map[string]any, 64)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			var line map[string]any
			if json.Unmarshal(sc.Bytes(), &line) != nil {
				line = map[string]any{"msg": "not JSON: " + sc.Text()}
			}
			lines <- line
		}
	}()
	started := <-lines
	require.Equal(t, "coordinator started", started["msg"], "%v", started)
	return cmd, started, lines
}

// TestBinaryExportsOTLPWithStandardVariables: with no tracing key in the
// config, the standard variables alone turn tracing on and send spans over
// OTLP/HTTP to a base endpoint (the exporter appends /v1/traces), with the
// configured headers, service name and resource attributes.
func TestBinaryExportsOTLPWithStandardVariables(t *testing.T) {
	t.Parallel()
	bin := binary(t)
	rcv := startOTLPReceiver(t, http.StatusOK)
	s := sim.New(sim.Options{})
	gw := httptest.NewServer(s.Gateway())
	defer gw.Close()
	restAddr := freeAddr(t)
	config := strings.Replace(binaryConfig(restAddr, freeAddr(t), decodeStep), "http://127.0.0.1:1", gw.URL, 1)
	cmd, _, lines := startBinary(t, bin, config, []string{
		"OTEL_TRACES_EXPORTER=otlp",
		"OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf",
		"OTEL_EXPORTER_OTLP_ENDPOINT=" + rcv.URL,
		"OTEL_EXPORTER_OTLP_HEADERS=x-api-key=secret",
		"OTEL_SERVICE_NAME=coordinator-test",
		"OTEL_RESOURCE_ATTRIBUTES=deployment.environment.name=ci",
		"OTEL_TRACES_SAMPLER=always_on",
		"OTEL_BSP_SCHEDULE_DELAY=20",
	})

	resp, err := http.Post("http://"+restAddr+"/v1/chat/completions", "application/json", strings.NewReader(chatBody))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	resp, err = http.Get("http://" + restAddr + "/v1/models")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Eventually(t, func() bool {
		return rcv.span("POST /v1/chat/completions") != nil && rcv.span("GET") != nil && rcv.span("leg passthrough") != nil
	}, 20*time.Second, 10*time.Millisecond, "spans exported")
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	for range lines {
	}
	require.NoError(t, cmd.Wait())

	rcv.mu.Lock()
	assert.Equal(t, "/v1/traces", rcv.paths[0], "the base endpoint gets /v1/traces")
	assert.Equal(t, "secret", rcv.apiKeys[0])
	assert.Equal(t, "coordinator-test", rcv.resource["service.name"])
	assert.Equal(t, "ci", rcv.resource["deployment.environment.name"])
	rcv.mu.Unlock()

	chat := rcv.span("POST /v1/chat/completions")
	assert.Equal(t, tracepb.Span_SPAN_KIND_SERVER, chat.GetKind())
	attrs := otlpAttrs(chat.GetAttributes())
	assert.Equal(t, "POST", attrs["http.request.method"].GetStringValue())
	assert.Equal(t, "/v1/chat/completions", attrs["http.route"].GetStringValue())
	assert.Equal(t, int64(200), attrs["http.response.status_code"].GetIntValue())
	decodeLeg := rcv.span("leg decode")
	require.NotNil(t, decodeLeg)
	step := rcv.spanByID(decodeLeg.GetParentSpanId())
	require.NotNil(t, step, "the leg's parent is exported")
	assert.Equal(t, "decode", step.GetName())
	assert.Equal(t, chat.GetSpanId(), step.GetParentSpanId(), "the step hangs off the server span")

	models, leg := rcv.span("GET"), rcv.span("leg passthrough")
	assert.Equal(t, "/v1/models", otlpAttrs(models.GetAttributes())["url.path"].GetStringValue())
	assert.Equal(t, models.GetSpanId(), leg.GetParentSpanId(), "the relayed leg hangs off its server span")
}

// TestBinaryLogsExporterErrorsAsJSON: a collector that refuses the spans
// is reported through the structured log, not as a plain log line.
func TestBinaryLogsExporterErrorsAsJSON(t *testing.T) {
	t.Parallel()
	bin := binary(t)
	rcv := startOTLPReceiver(t, http.StatusBadRequest)
	gw := httptest.NewServer(sim.New(sim.Options{}).Gateway())
	defer gw.Close()
	restAddr := freeAddr(t)
	config := strings.Replace(binaryConfig(restAddr, freeAddr(t), decodeStep), "http://127.0.0.1:1", gw.URL, 1)
	cmd, _, lines := startBinary(t, bin, config, []string{
		"OTEL_TRACES_EXPORTER=otlp",
		"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=http/protobuf",
		"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=" + rcv.URL + "/custom/path",
		"OTEL_BSP_SCHEDULE_DELAY=20",
	})
	resp, err := http.Post("http://"+restAddr+"/v1/chat/completions", "application/json", strings.NewReader(chatBody))
	require.NoError(t, err)
	resp.Body.Close()

	var exportErr map[string]any
	for line := range lines {
		msg, _ := line["msg"].(string)
		require.False(t, strings.HasPrefix(msg, "not JSON"), "every line is JSON: %q", msg)
		if msg == "opentelemetry" {
			exportErr = line
			break
		}
	}
	require.NotNil(t, exportErr, "the export error is logged")
	assert.Equal(t, "WARN", exportErr["level"])
	assert.Contains(t, exportErr["error"], "400")
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	for line := range lines {
		msg, _ := line["msg"].(string)
		assert.False(t, strings.HasPrefix(msg, "not JSON"), "every line is JSON: %q", msg)
	}
	assert.NoError(t, cmd.Wait(), "a failed flush does not fail the stop")
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	assert.Equal(t, "/custom/path", rcv.paths[0], "the traces endpoint is used as given")
}
