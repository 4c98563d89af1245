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

func (s *unarySink) Events([][]byte) error {
	s.streamed = true
	return nil
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

func (s *streamSink) Events(data [][]byte) error {
	s.events.Data = data
	err := s.stream.Send(&s.msg)
	s.events.Data = nil
	return err
}

// Response sends a whole answer (a worker that did not stream) as one event.
func (s *streamSink) Response(_ int, _ string, body []byte) error {
	return s.Events([][]byte{body})
}
