package rest

import (
	"bytes"

	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
	"github.com/coordinator-project/coordinator/service/apierror"
)

// contentTypeEventStream is the content type of a streamed answer.
const contentTypeEventStream = "text/event-stream"

// marshalEvents frames what grpc-gateway's stream forwarding hands the
// marshaler (runtime.ForwardResponseStream) as server-sent events: a
// message, {"result": *GenerateStreamResponse}, becomes each of its
// OpenAIEvents' data as one event, with its "event:" type when it has one,
// all in one buffer (the gateway writes and flushes once per message); the
// stream's final error, {"error": *status.Status}, becomes dialect d's
// error event (compat §15 D19: data: {"error":{...}}; the Responses' and
// Messages' "event: error"). ok is false for anything else. A tokens chunk
// is not served over REST: it is an error.
func marshalEvents(v any, d apierror.Dialect) (b []byte, ok bool, err error) {
	switch v := v.(type) {
	case map[string]any:
		m, ok := v["result"].(*coordinatorv1.GenerateStreamResponse)
		if !ok {
			return nil, false, nil
		}
		events := m.GetOpenai()
		if events == nil {
			return nil, true, status.Error(codes.Internal, "rest: a tokens chunk cannot be sent as server-sent events")
		}
		data, names := events.GetData(), events.GetEvent()
		if len(names) != 0 && len(names) != len(data) {
			return nil, true, status.Error(codes.Internal, "rest: event types not parallel to the events' data")
		}
		size := 0
		for i, e := range data {
			size += len(e) + len("data: \n\n")
			if names != nil {
				size += len(names[i]) + len("event: \n")
			}
		}
		b = make([]byte, 0, size)
		for i, e := range data {
			if names != nil && names[i] != "" {
				b = append(b, "event: "...)
				b = append(b, names[i]...)
				b = append(b, '\n')
			}
			b = appendEvent(b, e)
		}
		return b, true, nil
	case map[string]proto.Message:
		p, ok := v["error"].(*spb.Status)
		if !ok {
			return nil, false, nil
		}
		st := status.FromProto(p)
		return apierror.AppendErrorEvent(nil, d, apierror.HTTPStatus(st), st.Message(), paramOf(st)), true, nil
	}
	return nil, false, nil
}

// appendEvent frames data as one server-sent event; a multi-line payload
// becomes one data field per line.
func appendEvent(dst, data []byte) []byte {
	for {
		line, rest, more := bytes.Cut(data, []byte{'\n'})
		dst = append(dst, "data: "...)
		dst = append(dst, line...)
		dst = append(dst, '\n')
		if !more {
			break
		}
		data = rest
	}
	return append(dst, '\n')
}
