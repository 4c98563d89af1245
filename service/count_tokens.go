package service

import (
	"context"
	"strconv"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
	"github.com/coordinator-project/coordinator/internal/frontdoor"
	"github.com/coordinator-project/coordinator/internal/gateway"
	"github.com/coordinator-project/coordinator/internal/jsonbody"
	"github.com/coordinator-project/coordinator/internal/requestbody"
	"github.com/coordinator-project/coordinator/internal/wire/bodykeys"
	"github.com/coordinator-project/coordinator/internal/wire/legs"
	"github.com/coordinator-project/coordinator/service/apierror"
	"github.com/coordinator-project/coordinator/service/metrics"
	"github.com/coordinator-project/coordinator/service/tracing"
	"github.com/coordinator-project/coordinator/steps"
)

// Endpoint labels of the token counts in metrics and logs: the route's
// API and name, apart from the inference endpoints'.
const (
	EndpointMessagesCountTokens  = "messages_count_tokens"
	EndpointResponsesInputTokens = "responses_input_tokens"
	contentTypeJSON              = "application/json"
	msgNoTokenCounter            = "token counting needs a render step in pipeline.steps"
)

// CountTokens implements CoordinatorServiceServer: the prompt token count
// of a Messages or Responses body, from the pipeline's render step
// (steps.TokenCounter), with the answer in the API's own JSON. The body is
// bounded, parsed and checked as Generate's (requestbody.Document.CheckCount:
// a Messages body needs no max_tokens); "stream" is not read. No render
// step: UNIMPLEMENTED. The count's errors map as the render step's do
// (apierror.FromError).
func (c *Coordinator) CountTokens(ctx context.Context, req *coordinatorv1.CountTokensRequest) (*coordinatorv1.CountTokensResponse, error) {
	start := time.Now()
	id, legID := c.requestIDs(ctx, req.GetRequestId())
	defer c.inFlight.Add(id, legID)()
	_ = grpc.SetHeader(ctx, metadata.Pairs(headerRequestID, id))
	in := req.GetOpenai()
	format := FormatOf(in.GetEndpoint())
	endpoint := countEndpoint(format)
	n, err := c.countTokens(ctx, id, legID, in, format)
	code := status.Code(err)
	if err != nil {
		st, msg, level := failure(ctx, err, id)
		code, err = st.Code(), st.Err()
		c.log.Log(ctx, level, "token count "+msg, "request_id", id, "api", apiOf(ctx), "endpoint", endpoint,
			"duration", time.Since(start), "code", code.String(), "error", st.Message())
	}
	if apiOf(ctx) == metrics.APIGRPC { // the REST front counts its requests itself
		c.metrics.RequestDone(metrics.APIGRPC, endpoint, code.String(), time.Since(start))
	}
	if err != nil {
		return nil, err
	}
	c.log.InfoContext(ctx, "token count done", "request_id", id, "api", apiOf(ctx), "endpoint", endpoint,
		"duration", time.Since(start), "input_tokens", n)
	return &coordinatorv1.CountTokensResponse{
		RequestId:   id,
		InputTokens: int32(min(n, 1<<31-1)),
		Openai: &coordinatorv1.OpenAIResponse{
			StatusCode:  200,
			ContentType: contentTypeJSON,
			Json:        countAnswer(format, n),
		},
	}, nil
}

// countTokens checks the request and asks the pipeline's token counter,
// traced as a request (tracing.StartRequestSpan) and its render leg
// observed as any leg.
func (c *Coordinator) countTokens(ctx context.Context, id, legID string, in *coordinatorv1.OpenAIRequest, format legs.Format) (int, error) {
	if format != legs.FormatMessages && format != legs.FormatResponses {
		return 0, status.Errorf(codes.InvalidArgument, "CountTokens takes openai.endpoint ENDPOINT_MESSAGES or ENDPOINT_RESPONSES, got %s (request_id: %s)", in.GetEndpoint(), id)
	}
	counter, _ := c.pipeline.TokenCounter()
	if counter == nil {
		return 0, status.Errorf(codes.Unimplemented, "%s (request_id: %s)", msgNoTokenCounter, id)
	}
	rc, err := c.countContext(ctx, id, legID, in, format)
	if err != nil {
		return 0, err
	}
	ctx, span := tracing.StartRequestSpan(ctx, "CountTokens", rc)
	n, err := counter.CountTokens(gateway.WithObserver(ctx, c.metrics), rc) // the render leg in the leg metrics
	code := codes.OK
	if err != nil {
		st := apierror.FromError(err, id)
		code = st.Code()
		span.Fail(code, st.Message())
	}
	span.Finish(code)
	return n, err
}

// countContext is the request context of a count: the body within
// server.max_request_body_size and the structure limits, parsed once (or
// as the REST front parsed it), without duplicate keys, checked as the
// API's count body (CheckCount); the forwarded headers and the legs' id
// for the render call.
func (c *Coordinator) countContext(ctx context.Context, id, legID string, in *coordinatorv1.OpenAIRequest, format legs.Format) (*steps.RequestContext, error) {
	if n := int64(len(in.GetJson())); n > c.maxBody {
		return nil, status.Errorf(codes.ResourceExhausted, "request body too large: %d bytes, the limit is %d (request_id: %s)", n, c.maxBody, id)
	}
	doc := frontdoor.ParsedBody(ctx, in.GetJson(), format)
	if doc == nil {
		var err error
		if doc, err = requestbody.ParseLimited(in.GetJson(), format, c.limits); err != nil {
			return nil, invalidBody(err, id)
		}
	}
	obj := doc.Root()
	if key, dup := obj.DuplicateKey(); dup {
		return nil, status.Errorf(codes.InvalidArgument, "invalid JSON body: duplicate key %q (request_id: %s)", key, id)
	}
	if err := doc.CheckCount(); err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "%v (request_id: %s)", err, id)
	}
	rc := &steps.RequestContext{RequestID: id, LegRequestID: legID, Format: format, Body: in.GetJson(), Doc: doc}
	if raw, ok := obj.Get(bodykeys.Model); ok {
		rc.Model, _ = jsonbody.String(raw)
	}
	rc.Header = c.forwardedHeaders(ctx, id, format.String())
	return rc, nil
}

// countEndpoint is the metrics and log label of a count of format.
func countEndpoint(format legs.Format) string {
	if format == legs.FormatResponses {
		return EndpointResponsesInputTokens
	}
	return EndpointMessagesCountTokens
}

// countAnswer is the count in the API's JSON: Anthropic's
// {"input_tokens":N}, OpenAI's {"object":"response.input_tokens","input_tokens":N}.
func countAnswer(format legs.Format, n int) []byte {
	var b []byte
	if format == legs.FormatResponses {
		b = append(b, `{"object":"response.input_tokens","input_tokens":`...)
	} else {
		b = append(b, `{"input_tokens":`...)
	}
	return append(strconv.AppendInt(b, int64(n), 10), '}')
}
