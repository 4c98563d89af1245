package main

import (
	"fmt"
	"net/http"
	"time"

	"google.golang.org/grpc/codes"
)

// observation is what one request saw, on either front door. The REST and
// gRPC clients fill it in; classify judges it.
type observation struct {
	// status is the REST answer's HTTP status; 0 on gRPC or without an answer.
	status int
	// code is the gRPC call's final code (OK for a success); unset on REST.
	code codes.Code
	// chunks counts the stream's events or messages that carried answer
	// data (REST: neither [DONE] nor an error event).
	chunks int
	// done: the REST stream ended with data: [DONE], nothing after it.
	done bool
	// errorEvent is the code in a REST stream's final error event; 0: none.
	errorEvent int
	// transport is an error without an answer: refused, reset, a body cut
	// short outside a stream.
	transport error
	// cut is the read error that ended a REST stream early, for the
	// report; such a stream has neither done nor errorEvent.
	cut error
	// content describes an answer that is not what the request asked for
	// (nil when it is): a malformed body, a wrong token count, an error
	// body that is not OpenAI error JSON.
	content error
	// timedOut: the client's own deadline ended the request (a hang).
	timedOut bool
	// cancelled: the client went away on purpose before the end.
	cancelled bool
	// ttfb is the time to the first answer byte (REST) or message (gRPC);
	// total the time to the end.
	ttfb, total time.Duration
}

// class is how an outcome counts.
type class int

const (
	// classOK is a complete, correct answer.
	classOK class = iota
	// classFault is the right error for the injected fault.
	classFault
	// classDisconnect is a request the client cancelled on purpose.
	classDisconnect
	// classUnexpected is anything else: it fails the run.
	classUnexpected
	numClasses
)

var classNames = [numClasses]string{"ok", "expected-fault", "disconnected", "unexpected"}

func (c class) String() string { return classNames[c] }

// verdict is a classified outcome; cause says why it is unexpected.
type verdict struct {
	class class
	cause string
}

func unexpected(format string, args ...any) verdict {
	return verdict{class: classUnexpected, cause: fmt.Sprintf(format, args...)}
}

// classify judges o, the outcome of a request of kind k that carried the
// injected fault f (nil: none, a success is due).
func classify(k *kind, f *fault, o observation) verdict {
	switch {
	case o.timedOut:
		return unexpected("no answer within the client timeout (a hang)")
	case o.cancelled:
		return verdict{class: classDisconnect}
	case o.transport != nil:
		return unexpected("transport error")
	case f != nil && f.recovers:
		return success(k, o, f.header+": ", " (want a retried success)")
	case f == nil:
		return success(k, o, "", "")
	case k.grpc:
		return grpcFault(f, o)
	}
	return restFault(k, f, o)
}

// success judges an outcome that must be the whole, correct answer; the
// cause of a failure is framed by prefix and suffix.
func success(k *kind, o observation, prefix, suffix string) verdict {
	var cause string
	switch {
	case k.grpc && o.code != codes.OK:
		cause = "gRPC " + o.code.String()
	case !k.grpc && o.status != http.StatusOK:
		cause = fmt.Sprintf("status %d", o.status)
	case k.stream && o.errorEvent != 0:
		cause = fmt.Sprintf("error event %d", o.errorEvent)
	case k.stream && !k.grpc && !o.done:
		cause = "truncated stream (no [DONE], no error event)"
	case o.content != nil:
		cause = "wrong content"
	default:
		return verdict{class: classOK}
	}
	return unexpected("%s%s%s", prefix, cause, suffix)
}

// grpcFault judges a gRPC outcome that must carry f's code.
func grpcFault(f *fault, o observation) verdict {
	if o.code != f.code {
		return unexpected("%s: gRPC %s, want %s", f.header, o.code, f.code)
	}
	return verdict{class: classFault}
}

// restFault judges a REST outcome that must carry f's status, before the
// first byte or, for a mid-stream fault, in the stream's final error event.
func restFault(k *kind, f *fault, o observation) verdict {
	if o.status != http.StatusOK {
		if o.status != f.status {
			return unexpected("%s: status %d, want %d", f.header, o.status, f.status)
		}
		if o.content != nil {
			return unexpected("%s: status %d without an OpenAI error body", f.header, o.status)
		}
		return verdict{class: classFault}
	}
	switch {
	case !k.stream || !f.midStream:
		return unexpected("%s: status 200, want %d before the first byte", f.header, f.status)
	case o.done:
		return unexpected("%s: stream ended by [DONE], want an error event %d", f.header, f.status)
	case o.errorEvent == 0:
		return unexpected("%s: truncated stream (no [DONE], no error event)", f.header)
	case o.errorEvent != f.status:
		return unexpected("%s: error event %d, want %d", f.header, o.errorEvent, f.status)
	}
	return verdict{class: classFault}
}
