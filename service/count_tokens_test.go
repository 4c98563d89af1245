package service

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
	"github.com/coordinator-project/coordinator/internal/gateway"
	"github.com/coordinator-project/coordinator/internal/legids"
	"github.com/coordinator-project/coordinator/internal/wire/legs"
	"github.com/coordinator-project/coordinator/service/apierror"
	"github.com/coordinator-project/coordinator/service/config"
	"github.com/coordinator-project/coordinator/service/metrics"
	"github.com/coordinator-project/coordinator/steps"
)

// countingStep counts n tokens (or fails with err) and must never run.
type countingStep struct {
	t   *testing.T
	n   int
	err error
	got *steps.RequestContext
}

func (s *countingStep) Execute(context.Context, *steps.RequestContext) error {
	s.t.Error("a count ran the pipeline")
	return nil
}

func (s *countingStep) CountTokens(_ context.Context, rc *steps.RequestContext) (int, error) {
	s.got = rc
	return s.n, s.err
}

// plainStep is a step that counts nothing.
type plainStep struct{}

func (plainStep) Execute(context.Context, *steps.RequestContext) error { return nil }

func countCoordinator(t *testing.T, step steps.Step) *Coordinator {
	t.Helper()
	p, err := steps.NewPipeline([]steps.Plugin{
		{Type: "plain", New: func(map[string]any) (steps.Step, error) { return plainStep{}, nil }},
		{Type: "counter", New: func(map[string]any) (steps.Step, error) { return step, nil }},
	}, []steps.StepConfig{{Type: "plain"}, {Type: "counter"}}, steps.Defaults{})
	require.NoError(t, err)
	return NewCoordinator(p, metrics.New(), slog.New(slog.DiscardHandler), config.Default(), &legids.Registry{})
}

func countRequest(endpoint coordinatorv1.Endpoint, body string) *coordinatorv1.CountTokensRequest {
	return &coordinatorv1.CountTokensRequest{RequestId: "r-1", Openai: &coordinatorv1.OpenAIRequest{Endpoint: endpoint, Json: []byte(body)}}
}

// The count answers in each API's JSON; a Messages body needs no
// max_tokens and "stream" is not read; the counter gets the body parsed.
func TestCountTokensAnswers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		endpoint coordinatorv1.Endpoint
		body     string
		want     string
	}{
		{"messages", coordinatorv1.Endpoint_ENDPOINT_MESSAGES, `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`, `{"input_tokens":12}`},
		{"responses", coordinatorv1.Endpoint_ENDPOINT_RESPONSES, `{"model":"m","stream":"maybe","input":"hi"}`, `{"object":"response.input_tokens","input_tokens":12}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			step := &countingStep{t: t, n: 12}
			resp, err := countCoordinator(t, step).CountTokens(context.Background(), countRequest(tc.endpoint, tc.body))
			require.NoError(t, err)
			assert.Equal(t, "r-1", resp.GetRequestId())
			assert.EqualValues(t, 12, resp.GetInputTokens())
			assert.Equal(t, tc.want, string(resp.GetOpenai().GetJson()))
			assert.EqualValues(t, http.StatusOK, resp.GetOpenai().GetStatusCode())
			assert.Equal(t, "application/json", resp.GetOpenai().GetContentType())
			require.NotNil(t, step.got)
			assert.Equal(t, "m", step.got.Model)
			assert.NotEmpty(t, step.got.LegID())
		})
	}
}

// Bad bodies are INVALID_ARGUMENT (REST 400) before any count; a pipeline
// without a counter is UNIMPLEMENTED (501); the counter's errors map as
// the render step's (a render 500 is 502).
func TestCountTokensErrors(t *testing.T) {
	t.Parallel()
	messages, responses := coordinatorv1.Endpoint_ENDPOINT_MESSAGES, coordinatorv1.Endpoint_ENDPOINT_RESPONSES
	renderDown := &gateway.StatusError{Leg: "render", StatusCode: http.StatusInternalServerError}
	for _, tc := range []struct {
		name     string
		step     steps.Step
		endpoint coordinatorv1.Endpoint
		body     string
		code     codes.Code
		http     int
		msg      string
	}{
		{"no messages", nil, messages, `{"model":"m"}`, codes.InvalidArgument, 400, "messages is required"},
		{"bad block", nil, messages, `{"messages":[{"role":"user","content":[{"type":"video"}]}]}`, codes.InvalidArgument, 400, "unknown content block type"},
		{"max_tokens not read", nil, messages, `{"max_tokens":0,"messages":[]}`, codes.OK, 200, ""},
		{"not json", nil, messages, `{"messages":`, codes.InvalidArgument, 400, "invalid JSON body"},
		{"duplicate key", nil, responses, `{"input":"a","input":"b"}`, codes.InvalidArgument, 400, "duplicate key"},
		{"stateful", nil, responses, `{"input":"a","previous_response_id":"x"}`, codes.InvalidArgument, 400, "previous_response_id"},
		{"chat endpoint", nil, coordinatorv1.Endpoint_ENDPOINT_CHAT_COMPLETIONS, `{"messages":[]}`, codes.InvalidArgument, 400, "ENDPOINT_MESSAGES or ENDPOINT_RESPONSES"},
		{"no render step", plainStep{}, messages, `{"messages":[]}`, codes.Unimplemented, 501, "token counting needs a render step in pipeline.steps (request_id: r-1)"},
		{"render down", &countingStep{t: t, err: fmtErr(renderDown)}, messages, `{"messages":[]}`, codes.Unavailable, 502, "render"},
		{"client fault", &countingStep{t: t, err: fmtErr(legs.Invalidf("bad item"))}, responses, `{"input":"a"}`, codes.InvalidArgument, 400, "bad item"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			step := tc.step
			if step == nil {
				step = &countingStep{t: t, n: 1}
			}
			_, err := countCoordinator(t, step).CountTokens(context.Background(), countRequest(tc.endpoint, tc.body))
			st := status.Convert(err)
			assert.Equal(t, tc.code, st.Code(), "%v", err)
			assert.Equal(t, tc.http, apierror.HTTPStatus(st))
			assert.Contains(t, st.Message(), tc.msg)
		})
	}
}

func fmtErr(err error) error { return errors.Join(errors.New("counter"), err) }
