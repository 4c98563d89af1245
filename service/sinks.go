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

func (s *unarySink) Flush() error { return nil }

// streamSink sends the events of a GenerateStream call, those that arrived
// together in one message. Event copies into one arena, reused once the
// message is sent (SendMsg serialises before it returns).
type streamSink struct {
	stream grpc.ServerStreamingServer[coordinatorv1.GenerateStreamResponse]
	arena  []byte
	ends   []int // end offset in arena of each pending event
	events coordinatorv1.OpenAIEvents
	msg    coordinatorv1.GenerateStreamResponse
}

func newStreamSink(stream grpc.ServerStreamingServer[coordinatorv1.GenerateStreamResponse]) *streamSink {
	s := &streamSink{stream: stream}
	s.msg.Chunk = &coordinatorv1.GenerateStreamResponse_Openai{Openai: &s.events}
	return s
}

func (s *streamSink) Event(data []byte) error {
	s.arena = append(s.arena, data...)
	s.ends = append(s.ends, len(s.arena))
	return nil
}

func (s *streamSink) Flush() error {
	if len(s.ends) == 0 {
		return nil
	}
	s.events.Data = s.events.Data[:0]
	start := 0
	for _, end := range s.ends {
		s.events.Data = append(s.events.Data, s.arena[start:end:end])
		start = end
	}
	err := s.stream.Send(&s.msg)
	s.arena, s.ends = s.arena[:0], s.ends[:0]
	return err
}

// Response sends a whole answer (a worker that did not stream) as one event.
func (s *streamSink) Response(_ int, _ string, body []byte) error {
	if err := s.Event(body); err != nil {
		return err
	}
	return s.Flush()
}
