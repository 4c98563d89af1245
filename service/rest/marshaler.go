package rest

import (
	"io"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
)

// requestBody is the request body the front handler has already read and
// checked: rawJSON's decoder puts it into the gRPC request unparsed.
type requestBody struct {
	endpoint  coordinatorv1.Endpoint
	requestID string
	data      []byte
}

// Read reports the body as consumed: rawJSON takes data directly.
func (*requestBody) Read([]byte) (int, error) { return 0, io.EOF }

// Close implements io.Closer.
func (*requestBody) Close() error { return nil }

// rawJSON is the grpc-gateway marshaler of the OpenAI routes: request bodies
// go into GenerateRequest.openai.json as bytes and responses come out as the
// worker's bytes, with no JSON parsing or re-encoding on either side.
type rawJSON struct{}

// ContentType implements runtime.Marshaler; forwardStatus replaces it with
// the worker's own.
func (rawJSON) ContentType(any) string { return "application/json" }

// Marshal returns the worker's body of a GenerateResponse and the stored
// answer of a GetRequestResponse (queuedBody); anything else (not expected
// on these routes) is encoded with protojson.
func (rawJSON) Marshal(v any) ([]byte, error) {
	if r, ok := v.(*coordinatorv1.GenerateResponse); ok && r.GetOpenai() != nil {
		return r.GetOpenai().GetJson(), nil
	}
	if b, ok := queuedBody(v); ok {
		return b, nil
	}
	if m, ok := v.(proto.Message); ok {
		return protojson.Marshal(m)
	}
	return nil, status.Errorf(codes.Internal, "rest: cannot marshal %T", v)
}

// Unmarshal implements runtime.Marshaler; request bodies go through NewDecoder.
func (rawJSON) Unmarshal([]byte, any) error {
	return status.Error(codes.Internal, "rest: unmarshal is not used")
}

// NewDecoder fills a GenerateRequest from the requestBody the front handler
// installed as the HTTP request's body.
func (rawJSON) NewDecoder(r io.Reader) runtime.Decoder {
	return runtime.DecoderFunc(func(v any) error {
		body, ok := r.(*requestBody)
		if !ok {
			return status.Error(codes.Internal, "rest: request did not come through the front handler")
		}
		req, ok := v.(*coordinatorv1.GenerateRequest)
		if !ok {
			return status.Errorf(codes.Internal, "rest: cannot decode into %T", v)
		}
		req.RequestId = body.requestID
		req.Input = &coordinatorv1.GenerateRequest_Openai{Openai: &coordinatorv1.OpenAIRequest{
			Endpoint: body.endpoint,
			Json:     body.data,
		}}
		return nil
	})
}

// NewEncoder implements runtime.Marshaler.
func (m rawJSON) NewEncoder(w io.Writer) runtime.Encoder {
	return runtime.EncoderFunc(func(v any) error {
		b, err := m.Marshal(v)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	})
}
