package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
	"github.com/coordinator-project/coordinator/service/admission"
	"github.com/coordinator-project/coordinator/service/metrics"
	"github.com/coordinator-project/coordinator/sim"
)

// TestShutdownCutIsUnavailableNotAnError: the calls a drain cuts at
// server.shutdown_timeout (REST and gRPC streams, requests whose worker
// never answers) end UNAVAILABLE "server shutting down", are logged at
// info without a single ERROR or Internal line, and are counted as
// UNAVAILABLE in coordinator_requests_total and under their own outcome,
// coordinator_shutdown_cut_total, by API and kind.
func TestShutdownCutIsUnavailableNotAnError(t *testing.T) {
	t.Parallel()
	const streams = 3
	_, gw, _ := startSim(t, sim.Options{TokenDelay: tokenDelay})
	var adm *admission.Controller
	var m *metrics.Metrics
	var logs syncBuffer
	st := startStackLogged(t, map[string]string{"COORDINATOR_SERVER_SHUTDOWN_TIMEOUT": "300ms"}, &logs, gw, "", decodeOnly,
		fx.Populate(&adm, &m))
	client := coordinatorv1.NewCoordinatorServiceClient(st.conn)

	var wg sync.WaitGroup
	ends := make(chan string, 2*streams+2) // how each call ended
	for i := range streams {
		id := fmt.Sprint("rest-stream-", i)
		resp := st.post(t, "/v1/chat/completions", drainStream(longTokens), http.Header{"X-Request-Id": {id}})
		require.Equal(t, http.StatusOK, resp.StatusCode)
		wg.Go(func() {
			events := sseData(t, resp.Body)
			ends <- id + ": " + events[len(events)-1]
		})
		stream, err := client.GenerateStream(context.Background(), &coordinatorv1.GenerateStreamRequest{RequestId: fmt.Sprint("grpc-stream-", i),
			Input: &coordinatorv1.GenerateStreamRequest_Openai{Openai: &coordinatorv1.OpenAIRequest{
				Endpoint: coordinatorv1.Endpoint_ENDPOINT_CHAT_COMPLETIONS, Json: []byte(drainStream(longTokens))}}})
		require.NoError(t, err)
		wg.Go(func() {
			for {
				if _, err := stream.Recv(); err != nil {
					ends <- fmt.Sprint("grpc-stream-", i, ": ", status.Code(err), " ", status.Convert(err).Message())
					return
				}
			}
		})
	}
	wg.Go(func() {
		req, _ := http.NewRequest(http.MethodPost, st.restURL+"/v1/chat/completions", strings.NewReader(chatBody))
		req.Header.Set("X-Sim-Fault", "decode=hang")
		req.Header.Set("X-Request-Id", "rest-unary")
		resp, err := st.client.Do(req)
		if !assert.NoError(t, err) {
			return
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		ends <- fmt.Sprint("rest-unary: ", resp.StatusCode)
	})
	wg.Go(func() {
		_, err := client.Generate(metadata.AppendToOutgoingContext(context.Background(), "x-sim-fault", "decode=hang"), chatRequest("grpc-unary", chatBody))
		ends <- fmt.Sprint("grpc-unary: ", status.Code(err), " ", status.Convert(err).Message())
	})
	waitInFlight(t, adm, 2*streams+2, 2*streams)

	ctx, cancel := context.WithTimeout(context.Background(), st.app.StopTimeout())
	defer cancel()
	require.NoError(t, st.app.Stop(ctx))
	wg.Wait()
	close(ends)
	var endsSeen []string
	for end := range ends {
		endsSeen = append(endsSeen, end)
		switch {
		case strings.HasPrefix(end, "rest-stream"):
			id, _, _ := strings.Cut(end, ": ")
			assert.Contains(t, end, `{"error":{"message":"server shutting down (request_id: `+id+`)","type":"api_error","param":null,"code":503}}`)
		case strings.HasPrefix(end, "rest-unary"):
			assert.Equal(t, "rest-unary: 503", end)
		default:
			assert.Contains(t, end, ": Unavailable server shutting down", end)
		}
	}

	var cut int
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var entry map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &entry), line)
		assert.NotEqual(t, "ERROR", entry["level"], "no ERROR line: %s", line)
		assert.NotContains(t, line, "Internal")
		if entry["msg"] == "request cut short by the shutdown" {
			cut++
			assert.Equal(t, "INFO", entry["level"], line)
			assert.Equal(t, "Unavailable", entry["code"], line)
		}
	}
	if !assert.Equal(t, 2*streams+2, cut, "each cut call is logged once as such") {
		t.Log(strings.Join(endsSeen, "\n"), "\n", logs.String()) // which call was logged otherwise, and how
	}

	assert.Equal(t, float64(streams+1), gathered(t, m, "coordinator_requests_total", map[string]string{"api": "grpc", "status": "Unavailable"}))
	assert.Zero(t, gathered(t, m, "coordinator_requests_total", map[string]string{"status": "Internal"}))
	for _, c := range []struct{ api, kind string }{{"rest", "stream"}, {"grpc", "stream"}, {"rest", "request"}, {"grpc", "request"}} {
		want := 1.0
		if c.kind == "stream" {
			want = streams
		}
		assert.Equal(t, want, gathered(t, m, "coordinator_shutdown_cut_total", map[string]string{"api": c.api, "kind": c.kind}), "%s %s", c.api, c.kind)
	}
}

// gathered sums the counter samples of a metric family whose labels
// include want, read from the registry.
func gathered(t *testing.T, m *metrics.Metrics, name string, want map[string]string) float64 {
	t.Helper()
	families, err := m.Gatherer().Gather()
	require.NoError(t, err)
	var sum float64
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	samples:
		for _, s := range f.GetMetric() {
			have := map[string]string{}
			for _, l := range s.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for k, v := range want {
				if have[k] != v {
					continue samples
				}
			}
			sum += s.GetCounter().GetValue()
		}
	}
	return sum
}
