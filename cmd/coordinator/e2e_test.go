package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"go.uber.org/fx/fxtest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
	"github.com/coordinator-project/coordinator/service"
	"github.com/coordinator-project/coordinator/service/config"
	"github.com/coordinator-project/coordinator/service/logging"
	"github.com/coordinator-project/coordinator/sim"
)

// stack is the coordinator app, started from a config, in front of a
// gateway (the simulator unless a test brings its own).
type stack struct {
	restURL string
	conn    *grpc.ClientConn
	client  *http.Client
	app     *fxtest.App // stopped when the test ends; a test may stop it first
}

// startStack starts the real fx app on 127.0.0.1:0 with the YAML pipeline
// section given, and stops it when the test ends.
func startStack(t testing.TB, gatewayURL, renderURL, extraYAML string, opts ...fx.Option) *stack {
	t.Helper()
	return startStackEnv(t, nil, gatewayURL, renderURL, extraYAML, opts...)
}

// startStackEnv is startStack with COORDINATOR_* overrides.
func startStackEnv(t testing.TB, env map[string]string, gatewayURL, renderURL, extraYAML string, opts ...fx.Option) *stack {
	t.Helper()
	return startStackLogged(t, env, nil, gatewayURL, renderURL, extraYAML, opts...)
}

// startStackLogged is startStackEnv logging to logs at debug level and
// above (nil: no log).
func startStackLogged(t testing.TB, env map[string]string, logs io.Writer, gatewayURL, renderURL, extraYAML string, opts ...fx.Option) *stack {
	t.Helper()
	yaml := fmt.Sprintf(`
log_level: 1
server:
  listen_addr: "127.0.0.1:0"
  grpc_listen_addr: "127.0.0.1:0"
  max_request_body_size: 1
gateway:
  address: %q
%s`, gatewayURL, strings.ReplaceAll(extraYAML, "RENDER_URL", renderURL))
	cfg, err := config.Parse([]byte(yaml), func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	require.NoError(t, err)
	var addrs *service.Addresses
	logger := logging.NewLogger(io.Discard, cfg.LogLevel)
	if logs != nil {
		logger = logging.NewLogger(logs, 4)
	}
	app := fxtest.New(t, App(cfg, logger), fx.Options(opts...), fx.Populate(&addrs))
	app.RequireStart()
	t.Cleanup(app.RequireStop)
	conn, err := grpc.NewClient(addrs.GRPC(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{}}
	t.Cleanup(client.CloseIdleConnections)
	return &stack{restURL: "http://" + addrs.REST(), conn: conn, client: client, app: app}
}

const decodeOnly = `
pipeline:
  steps:
    - type: decode
`

// startSim starts the simulator's gateway and render service on loopback.
func startSim(t testing.TB, opts sim.Options) (*sim.Sim, string, string) {
	t.Helper()
	s := sim.New(opts)
	gw := httptest.NewServer(s.Gateway())
	t.Cleanup(gw.Close)
	render := httptest.NewServer(s.Render())
	t.Cleanup(render.Close)
	return s, gw.URL, render.URL
}

func (s *stack) post(t *testing.T, path, body string, header http.Header) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, s.restURL+path, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := s.client.Do(req)
	require.NoError(t, err)
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func readAll(t *testing.T, r io.Reader) string {
	t.Helper()
	b, err := io.ReadAll(r)
	require.NoError(t, err)
	return string(b)
}

// sseData reads a server-sent event stream to its end and returns each
// event's data.
func sseData(t *testing.T, r io.Reader) []string {
	t.Helper()
	var events []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			events = append(events, data)
		}
	}
	require.NoError(t, sc.Err())
	return events
}

// recvEvents reads a GenerateStream to its clean end and returns each
// event's data.
func recvEvents(t *testing.T, stream grpc.ServerStreamingClient[coordinatorv1.GenerateStreamResponse]) []string {
	t.Helper()
	var events []string
	for {
		msg, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return events
		}
		require.NoError(t, err)
		for _, d := range msg.GetOpenai().GetData() {
			events = append(events, string(d))
		}
	}
}

// openAIError decodes an OpenAI error body.
func openAIError(t *testing.T, body string) (message, typ string, code int) {
	t.Helper()
	var e struct {
		Error struct {
			Message string `json:"message"`
			Type    string `json:"type"`
			Code    int    `json:"code"`
		} `json:"error"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &e), body)
	return e.Error.Message, e.Error.Type, e.Error.Code
}
