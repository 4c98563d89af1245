package service

import (
	"google.golang.org/grpc"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
)

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

func (s *unarySink) Event([]byte) error {
	s.streamed = true
	return nil
}

// streamSink sends each event of a GenerateStream call as one message.
type streamSink struct {
	stream grpc.ServerStreamingServer[coordinatorv1.GenerateStreamResponse]
}

func (s *streamSink) Event(data []byte) error {
	// SendMsg serialises before it returns, so data may be reused after.
	return s.stream.Send(&coordinatorv1.GenerateStreamResponse{
		Chunk: &coordinatorv1.GenerateStreamResponse_Openai{Openai: &coordinatorv1.OpenAIEvent{Data: data}},
	})
}

// Response sends a whole answer (a worker that did not stream) as one event.
func (s *streamSink) Response(_ int, _ string, body []byte) error {
	return s.Event(body)
}
