package main

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"google.golang.org/grpc/codes"
)

// kindNamed is the kind of the mix called name.
func kindNamed(t *testing.T, name string) *kind {
	t.Helper()
	return named(t, kinds, name, func(k *kind) string { return k.name })
}

// faultNamed is the fault whose header is header.
func faultNamed(t *testing.T, header string) *fault {
	t.Helper()
	return named(t, faults, header, func(f *fault) string { return f.header })
}

// named is the item of items whose key is name.
func named[T any](t *testing.T, items []T, name string, key func(*T) string) *T {
	t.Helper()
	for i := range items {
		if key(&items[i]) == name {
			return &items[i]
		}
	}
	t.Fatalf("no %q", name)
	return nil
}

func TestClassify(t *testing.T) {
	t.Parallel()
	okStream := observation{status: 200, chunks: streamChunks, done: true}
	tests := []struct {
		name  string
		kind  string
		fault string // "" for none
		obs   observation
		class class
		cause string
	}{
		{name: "rest ok", kind: "rest-chat", obs: observation{status: 200}, class: classOK},
		{name: "rest stream ok", kind: "rest-chat-stream", obs: okStream, class: classOK},
		{name: "rest wrong content", kind: "rest-chat", obs: observation{status: 200, content: errors.New("x")},
			class: classUnexpected, cause: "wrong content"},
		{name: "rest unasked error", kind: "rest-chat", obs: observation{status: 502},
			class: classUnexpected, cause: "status 502"},
		{name: "rest stream without end", kind: "rest-chat-stream", obs: observation{status: 200, chunks: 3},
			class: classUnexpected, cause: "truncated stream (no [DONE], no error event)"},
		{name: "rest stream unasked error event", kind: "rest-chat-stream", obs: observation{status: 200, chunks: 3, errorEvent: 502},
			class: classUnexpected, cause: "error event 502"},
		{name: "transport error", kind: "rest-chat", obs: observation{transport: errors.New("connection reset")},
			class: classUnexpected, cause: "transport error"},
		{name: "hang", kind: "grpc-chat", fault: "decode=hang", obs: observation{timedOut: true},
			class: classUnexpected, cause: "no answer within the client timeout (a hang)"},
		{name: "disconnect", kind: "rest-chat-stream", obs: observation{status: 200, chunks: 1, cancelled: true}, class: classDisconnect},

		{name: "relayed decode status", kind: "rest-chat", fault: "decode=status:503", obs: observation{status: 503}, class: classFault},
		{name: "prefill 5xx is a bad gateway", kind: "rest-chat-stream", fault: "prefill=status:500", obs: observation{status: 502}, class: classFault},
		{name: "wrong status", kind: "rest-chat", fault: "prefill=status:500", obs: observation{status: 500},
			class: classUnexpected, cause: "prefill=status:500: status 500, want 502"},
		{name: "error body not OpenAI", kind: "rest-chat", fault: "prefill=hang", obs: observation{status: 504, content: errors.New("x")},
			class: classUnexpected, cause: "prefill=hang: status 504 without an OpenAI error body"},
		{name: "fault swallowed", kind: "rest-chat", fault: "decode=status:500", obs: observation{status: 200},
			class: classUnexpected, cause: "decode=status:500: status 200, want 500 before the first byte"},
		{name: "error known before the first byte sent after it", kind: "rest-chat-stream", fault: "prefill=hang",
			obs:   observation{status: 200, chunks: 1, errorEvent: 504},
			class: classUnexpected, cause: "prefill=hang: status 200, want 504 before the first byte"},
		{name: "mid-stream reset as a final error event", kind: "rest-chat-stream", fault: "decode=reset-mid-stream",
			obs: observation{status: 200, chunks: 1, errorEvent: 502}, class: classFault},
		{name: "mid-stream reset before the first byte", kind: "rest-completions-stream", fault: "decode=reset-mid-stream",
			obs: observation{status: 502}, class: classFault},
		{name: "mid-stream reset with a wrong event", kind: "rest-chat-stream", fault: "decode=reset-mid-stream",
			obs:   observation{status: 200, chunks: 1, errorEvent: 500},
			class: classUnexpected, cause: "decode=reset-mid-stream: error event 500, want 502"},
		{name: "mid-stream reset cut without an event", kind: "rest-chat-stream", fault: "decode=reset-mid-stream",
			obs:   observation{status: 200, chunks: 1, cut: errors.New("unexpected EOF")},
			class: classUnexpected, cause: "decode=reset-mid-stream: truncated stream (no [DONE], no error event)"},
		{name: "mid-stream reset unnoticed", kind: "rest-chat-stream", fault: "decode=reset-mid-stream", obs: okStream,
			class: classUnexpected, cause: "decode=reset-mid-stream: stream ended by [DONE], want an error event 502"},
		{name: "non-streamed reset", kind: "rest-chat", fault: "decode=reset-mid-stream", obs: observation{status: 200},
			class: classUnexpected, cause: "decode=reset-mid-stream: status 200, want 502 before the first byte"},

		{name: "grpc ok", kind: "grpc-tokens-stream", obs: observation{code: codes.OK, chunks: 16}, class: classOK},
		{name: "grpc wrong content", kind: "grpc-tokens", obs: observation{code: codes.OK, content: errors.New("x")},
			class: classUnexpected, cause: "wrong content"},
		{name: "grpc unasked error", kind: "grpc-chat", obs: observation{code: codes.Internal},
			class: classUnexpected, cause: "gRPC Internal"},
		{name: "grpc right code", kind: "grpc-chat-stream", fault: "decode=reset-mid-stream", obs: observation{code: codes.Unavailable, chunks: 1}, class: classFault},
		{name: "grpc timeout code", kind: "grpc-tokens", fault: "prefill=hang", obs: observation{code: codes.DeadlineExceeded}, class: classFault},
		{name: "grpc wrong code", kind: "grpc-tokens", fault: "prefill=hang", obs: observation{code: codes.Unavailable},
			class: classUnexpected, cause: "prefill=hang: gRPC Unavailable, want DeadlineExceeded"},
		{name: "grpc fault swallowed", kind: "grpc-chat", fault: "decode=status:503", obs: observation{code: codes.OK},
			class: classUnexpected, cause: "decode=status:503: gRPC OK, want Unavailable"},

		{name: "retried fault absorbed", kind: "rest-chat-stream", fault: "prefill=status-once:503", obs: okStream, class: classOK},
		{name: "retried fault absorbed on gRPC", kind: "grpc-tokens", fault: "prefill=close/2", obs: observation{code: codes.OK}, class: classOK},
		{name: "retried fault reaching the client", kind: "rest-chat", fault: "prefill=status-once:503", obs: observation{status: 502},
			class: classUnexpected, cause: "prefill=status-once:503: status 502 (want a retried success)"},
		{name: "retried fault reaching a gRPC client", kind: "grpc-chat-stream", fault: "render=status-once:502", obs: observation{code: codes.Unavailable},
			class: classUnexpected, cause: "render=status-once:502: gRPC Unavailable (want a retried success)"},
		{name: "retried fault, answer wrong", kind: "rest-image-chat", fault: "encode=close/1", obs: observation{status: 200, content: errors.New("x")},
			class: classUnexpected, cause: "encode=close/1: wrong content (want a retried success)"},
		{name: "stall mid-stream as a final error event", kind: "rest-chat-stream", fault: "decode=hang-mid-stream",
			obs: observation{status: 200, chunks: 1, errorEvent: 504}, class: classFault},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var f *fault
			if tt.fault != "" {
				f = faultNamed(t, tt.fault)
			}
			v := classify(kindNamed(t, tt.kind), f, tt.obs)
			assert.Equal(t, tt.class, v.class)
			assert.Equal(t, tt.cause, v.cause)
		})
	}
}
