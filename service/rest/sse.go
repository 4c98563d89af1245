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
// OpenAIEvents' data as one event, all in one buffer (the gateway writes
// and flushes once per message); the stream's final error, {"error":
// *status.Status}, becomes one data: {"error":{...}} event (compat §15
// D19). ok is false for anything else. A tokens chunk is not served over
// REST: it is an error.
func marshalEvents(v any) (b []byte, ok bool, err error) {
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
		size := 0
		for _, d := range events.GetData() {
			size += len(d) + len("data: \n\n")
		}
		b = make([]byte, 0, size)
		for _, d := range events.GetData() {
			b = appendEvent(b, d)
		}
		return b, true, nil
	case map[string]proto.Message:
		p, ok := v["error"].(*spb.Status)
		if !ok {
			return nil, false, nil
		}
		st := status.FromProto(p)
		b = append(b, "data: "...)
		b = apierror.AppendOpenAIError(b, apierror.HTTPStatus(st), st.Message(), paramOf(st))
		return append(b, "\n\n"...), true, nil
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
