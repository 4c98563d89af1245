package service

import (
	"cmp"
	"context"
	"errors"
	"net/http"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
	"github.com/coordinator-project/coordinator/internal/gateway"
	"github.com/coordinator-project/coordinator/internal/headers"
	"github.com/coordinator-project/coordinator/steps"
)

// setAnswerHeader gives the client the headers of a worker's answer that
// the header policy lets through (headers.AnswerMetadata) as the call's
// header metadata: set before the first message or the call's error, they
// go out with it (a gRPC error before any message included: grpc-go then
// sends them in a header frame of their own before the status). The REST
// front turns them back into response headers. Two are the coordinator's
// alone (a worker's is dropped): x-prefill-weight-version, the weight
// version rc's prefill ran on when its answer said; and, after P/D, the
// x-session-token that joins the prefill's and the decode's own
// (headers.JoinSessionTokens), which the client sends back to keep both.
// x-weight-version is the worker's when it sent one, else versions: the
// fleet's weight versions over the answer as the control plane knows them
// ("v1", or "v1,v2" when it changed; "": unknown, no header).
func setAnswerHeader(ctx context.Context, h http.Header, rc *steps.RequestContext, versions string) {
	md := headers.AnswerMetadata(h)
	if versions != "" && len(md.Get(headers.WeightVersion)) == 0 {
		md.Set(headers.WeightVersion, versions)
	}
	md.Delete(headers.PrefillWeightVersion)
	if v := rc.PD.Answer.WeightVersion; v != "" {
		md.Set(headers.PrefillWeightVersion, v)
	}
	if rc.PD.Done {
		t := headers.PhaseTokens{Prefill: cmp.Or(rc.PD.Answer.SessionToken, rc.SessionTokens.Prefill), Decode: rc.SessionTokens.Decode}
		if v := md.Get(headers.SessionToken); len(v) > 0 {
			t.Decode = v[0]
		}
		md.Delete(headers.SessionToken)
		if t != (headers.PhaseTokens{}) {
			md.Set(headers.SessionToken, headers.JoinSessionTokens(t))
		}
	}
	if md.Len() > 0 {
		_ = grpc.SetHeader(ctx, md)
	}
}

// relayedHeader is the header of the worker's answer err relays to the
// client (the decode legs' non-2xx answers), nil if none.
func relayedHeader(err error) http.Header {
	var se *gateway.StatusError
	if errors.As(err, &se) && se.Relay {
		return se.Header
	}
	return nil
}

// unarySink collects the one answer of a Generate call.
type unarySink struct {
	status      int
	contentType string
	body        []byte
	streamed    bool
}

func (s *unarySink) Response(status int, contentType string, body []byte) error {
	s.status, s.contentType, s.body = status, contentType, body
	return nil
}

// Header implements steps.Sink: run's answerSink sets the header
// metadata.
func (*unarySink) Header(http.Header) {}

func (s *unarySink) Events([][]byte, []string) error {
	s.streamed = true
	return nil
}

// answer is the Generate answer of request id the sink took: Internal
// when the worker streamed it.
func (s *unarySink) answer(id string) (*coordinatorv1.GenerateResponse, error) {
	if s.streamed {
		return nil, status.Errorf(codes.Internal, "decode worker streamed an answer to a non-streaming request (request_id: %s)", id)
	}
	return &coordinatorv1.GenerateResponse{
		RequestId: id,
		Output: &coordinatorv1.GenerateResponse_Openai{Openai: &coordinatorv1.OpenAIResponse{
			StatusCode:  int32(s.status),
			ContentType: s.contentType,
			Json:        s.body,
		}},
	}, nil
}

// streamSink sends each batch of events of a GenerateStream call as one
// message. It reuses one message: SendMsg is done with it when it returns.
type streamSink struct {
	stream grpc.ServerStreamingServer[coordinatorv1.GenerateStreamResponse]
	events coordinatorv1.OpenAIEvents
	msg    coordinatorv1.GenerateStreamResponse
}

func newStreamSink(stream grpc.ServerStreamingServer[coordinatorv1.GenerateStreamResponse]) *streamSink {
	s := &streamSink{stream: stream}
	s.msg.Chunk = &coordinatorv1.GenerateStreamResponse_Openai{Openai: &s.events}
	return s
}

// Header implements steps.Sink: run's answerSink sets the header
// metadata.
func (*streamSink) Header(http.Header) {}

func (s *streamSink) Events(data [][]byte, names []string) error {
	s.events.Data, s.events.Event = data, names
	err := s.stream.Send(&s.msg)
	s.events.Data, s.events.Event = nil, nil
	return err
}

// Response sends a whole answer (a worker that did not stream) as one event.
func (s *streamSink) Response(_ int, _ string, body []byte) error {
	return s.Events([][]byte{body}, nil)
}
