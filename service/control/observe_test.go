package control_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
	"github.com/coordinator-project/coordinator/sim"
)

// TestACallIsASpanWithAChildPerWorkerAndALogLine: the pause is a span
// with one child span per engine, the dead engine's marked failed, and
// one JSON log line.
func TestACallIsASpanWithAChildPerWorkerAndALogLine(t *testing.T) {
	t.Parallel()
	engs, workers := engines(t, sim.EngineCounts{Decode: 2})
	var logs bytes.Buffer
	e := newEnv(t, workers, envOptions{log: slog.New(slog.NewJSONHandler(&logs, nil))})
	engs[len(engs)-1].Stop()
	dead := workers[len(workers)-1].ID
	_, err := e.client.Pause(t.Context(), &coordinatorv1.PauseRequest{Mode: "wait"})
	require.Error(t, err)

	var call sdktrace.ReadOnlySpan
	var children []sdktrace.ReadOnlySpan
	for _, s := range spans.Ended() {
		if s.Name() == "control pause" && s.Status().Description != "" && strings.Contains(s.Status().Description, dead) {
			call = s
		}
	}
	require.NotNil(t, call, "the call's span")
	for _, s := range spans.Ended() {
		if s.Parent().SpanID() == call.SpanContext().SpanID() {
			children = append(children, s)
		}
	}
	require.Len(t, children, len(workers), "one child per worker")
	var names []string
	for _, c := range children {
		names = append(names, c.Name())
		if strings.HasSuffix(c.Name(), dead) {
			assert.Equal(t, codes.Error, c.Status().Code)
		} else {
			assert.Equal(t, codes.Unset, c.Status().Code, c.Name())
		}
	}
	assert.True(t, slices.Contains(names, "control pause "+dead), names)
	assert.Equal(t, codes.Error, call.Status().Code)

	var line map[string]any
	require.NoError(t, json.Unmarshal(bytes.TrimSpace(logs.Bytes()), &line), logs.String())
	assert.Equal(t, "control call", line["msg"])
	assert.Equal(t, "pause", line["route"])
	assert.Equal(t, "worker_failed", line["outcome"])
	assert.Equal(t, float64(len(workers)), line["workers"])
	assert.Equal(t, 1.0, line["failed"])
	assert.Contains(t, line["error"], dead)
}
