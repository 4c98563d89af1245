package tokens

import (
	"errors"
	"net/http"

	"google.golang.org/grpc"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
	"github.com/coordinator-project/coordinator/steps"
)

// errStreamedAnswer is a worker that streamed the answer to a non-streaming
// tokens request.
var errStreamedAnswer = errors.New("decode worker streamed an answer to a non-streaming request")

// UnarySink turns the decode worker's whole answer to a Generate
// tokens request into a TokensResponse.
type UnarySink struct {
	prompt []uint32 // the request's token IDs, for prompt_logprobs
	resp   *coordinatorv1.TokensResponse
	check  VersionCheck
}

// VersionCheck is told the weight version that sampled a choice's first
// token, once the answer names it; its error ends the answer instead (the
// service's pipeline.version_policy).
type VersionCheck func(decodeVersion string) error

// checkVersions runs check (nil: none) on each choice that names its
// weight versions.
func checkVersions(check VersionCheck, choices []*coordinatorv1.TokensChoice) error {
	if check == nil {
		return nil
	}
	for _, c := range choices {
		if spans := c.GetWeightVersions(); len(spans) > 0 {
			if err := check(spans[0].GetVersion()); err != nil {
				return err
			}
		}
	}
	return nil
}

func NewUnarySink(in *coordinatorv1.TokensRequest, check VersionCheck) *UnarySink {
	return &UnarySink{prompt: in.GetTokenIds(), check: check}
}

// Response implements steps.Sink.
func (s *UnarySink) Response(_ int, _ string, body []byte) error {
	resp, err := parseTokensResponse(body, s.prompt)
	if err != nil {
		return err
	}
	if err := checkVersions(s.check, resp.GetChoices()); err != nil {
		return err
	}
	s.resp = resp
	return nil
}

// Header implements steps.Sink: the service's answerSink sets the header
// metadata.
func (*UnarySink) Header(http.Header) {}

// Answer is the answer the sink took, nil before.
func (s *UnarySink) Answer() *coordinatorv1.TokensResponse { return s.resp }

// Events implements steps.Sink: the request asked for no stream.
func (s *UnarySink) Events([][]byte, []string) error { return errStreamedAnswer }

// StreamSink sends the decode worker's stream to a GenerateStream
// tokens request: each batch of events that arrived together becomes one
// TokensChunk, the new tokens of each choice merged by index. The worker's
// last events carry the finish reasons, then the usage; "[DONE]" sends
// nothing. A choice's weight versions come with its last event (vLLM's
// final chunk) and cover all its tokens, those of earlier chunks included.
// The message, its choices and their logprob entries are reused, and so is
// the storage each event is decoded into: SendMsg is done with the message
// when it returns.
type StreamSink struct {
	stream grpc.ServerStreamingServer[coordinatorv1.GenerateStreamResponse]
	chunk  coordinatorv1.TokensChunk
	msg    coordinatorv1.GenerateStreamResponse
	// choices holds every choice message made so far; the first used of
	// them are in chunk.Choices.
	choices   []*coordinatorv1.TokensChoice
	used      int
	newChoice func() *coordinatorv1.TokensChoice
	scratch   scratch
	outputs   outputCounts
	check     VersionCheck
}

// NewStreamSink is the sink of stream; check (nil: none) is told each
// choice's first weight version before the chunk that names it is sent.
func NewStreamSink(stream grpc.ServerStreamingServer[coordinatorv1.GenerateStreamResponse], check VersionCheck) *StreamSink {
	s := &StreamSink{stream: stream, outputs: outputCounts{}, check: check}
	s.msg.Chunk = &coordinatorv1.GenerateStreamResponse_Tokens{Tokens: &s.chunk}
	s.newChoice = s.takeChoice
	return s
}

// takeChoice hands out an empty choice, reusing one of an earlier message.
func (s *StreamSink) takeChoice() *coordinatorv1.TokensChoice {
	if s.used == len(s.choices) {
		s.choices = append(s.choices, &coordinatorv1.TokensChoice{})
	}
	c := s.choices[s.used]
	s.used++
	c.Index, c.FinishReason = 0, coordinatorv1.FinishReason_FINISH_REASON_UNSPECIFIED
	c.TokenIds, c.Logprobs, c.WeightVersions = c.TokenIds[:0], c.Logprobs[:0], nil
	return c
}

// Header implements steps.Sink: the service's answerSink sets the header
// metadata.
func (*StreamSink) Header(http.Header) {}

// Events implements steps.Sink.
func (s *StreamSink) Events(data [][]byte, _ []string) error {
	s.chunk.Choices, s.chunk.Usage, s.used = s.chunk.Choices[:0], nil, 0
	s.scratch.release() // the last message is sent, or given up
	for _, d := range data {
		if string(d) == "[DONE]" {
			continue
		}
		if err := mergeStreamEvent(&s.chunk, d, s.newChoice, &s.scratch, s.outputs); err != nil {
			return err
		}
	}
	if len(s.chunk.Choices) == 0 && s.chunk.Usage == nil {
		return nil
	}
	if err := checkVersions(s.check, s.chunk.Choices); err != nil {
		return err
	}
	return s.stream.Send(&s.msg)
}

// Response implements steps.Sink: a worker that answered in one piece is
// sent on as one chunk with every choice finished and the usage.
func (s *StreamSink) Response(_ int, _ string, body []byte) error {
	resp, err := parseTokensResponse(body, nil)
	if err != nil {
		return err
	}
	if err := checkVersions(s.check, resp.GetChoices()); err != nil {
		return err
	}
	s.chunk.Choices, s.chunk.Usage = resp.GetChoices(), resp.GetUsage()
	err = s.stream.Send(&s.msg)
	s.chunk.Choices, s.chunk.Usage = nil, nil
	return err
}

// Interface guards.
var (
	_ steps.Sink = (*UnarySink)(nil)
	_ steps.Sink = (*StreamSink)(nil)
)
