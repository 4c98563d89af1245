package rest

import (
	"io"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
	"github.com/coordinator-project/coordinator/service/apierror"
)

// dialectOf is the error dialect of the marshaler grpc-gateway picked for
// a request; OpenAI's for any other.
func dialectOf(m runtime.Marshaler) apierror.Dialect {
	if r, ok := m.(rawJSON); ok {
		return r.dialect
	}
	return apierror.DialectOpenAI
}

// rawJSON is the grpc-gateway marshaler of every route served through the
// mux, for every content type. Request bodies go into openai.json as bytes
// and whole answers come out as the worker's bytes, with no JSON parsing
// or re-encoding on either side; GenerateStream's messages come out as
// server-sent events (sse.go).
//
// One marshaler serves both kinds of answer, told apart by what the
// gateway hands it, because grpc-gateway picks the outbound marshaler by
// the request's Accept header: pinning Accept per route would change the
// Accept header every leg carries (the client's, compat §3.4). One
// instance per error dialect: the Responses' and the Messages' routes get
// theirs by the Content-Type the front sets (binding.contentType).
type rawJSON struct {
	// dialect frames a stream's final error event.
	dialect apierror.Dialect
}

// ContentType implements runtime.Marshaler: text/event-stream for a stream
// and its error event, application/json otherwise (forwardStatus replaces
// it with the worker's own).
func (rawJSON) ContentType(v any) string {
	switch v.(type) {
	case *coordinatorv1.GenerateStreamResponse, map[string]proto.Message:
		return contentTypeEventStream
	}
	return "application/json"
}

// Marshal returns the worker's body of a GenerateResponse, the count's
// answer of a CountTokensResponse, the stored
// answer of a GetRequestResponse (queuedBody), and a stream's message or
// final error as server-sent events (marshalEvents); anything else (not
// expected on these routes) is encoded with protojson.
func (m rawJSON) Marshal(v any) ([]byte, error) {
	if r, ok := v.(*coordinatorv1.GenerateResponse); ok && r.GetOpenai() != nil {
		return r.GetOpenai().GetJson(), nil
	}
	if r, ok := v.(*coordinatorv1.CountTokensResponse); ok && r.GetOpenai() != nil {
		return r.GetOpenai().GetJson(), nil
	}
	if b, ok := queuedBody(v); ok {
		return b, nil
	}
	if b, ok := storedBody(v); ok {
		return b, nil
	}
	if b, ok, err := marshalEvents(v, m.dialect); ok {
		return b, err
	}
	if m, ok := v.(proto.Message); ok {
		return protojson.Marshal(m)
	}
	return nil, status.Errorf(codes.Internal, "rest: cannot marshal %T", v)
}

// Delimiter implements runtime.Delimited: events carry their own framing.
func (rawJSON) Delimiter() []byte { return nil }

// Unmarshal implements runtime.Marshaler; request bodies go through NewDecoder.
func (rawJSON) Unmarshal([]byte, any) error {
	return status.Error(codes.Internal, "rest: unmarshal is not used")
}

// NewDecoder puts a request body into the *[]byte the HTTP rules' body
// names (openai.json) unparsed: the bytes of the front's *bodyReader as
// they are, any other reader's read whole.
func (rawJSON) NewDecoder(r io.Reader) runtime.Decoder {
	return runtime.DecoderFunc(func(v any) error {
		dst, ok := v.(*[]byte)
		if !ok {
			return status.Errorf(codes.Internal, "rest: cannot decode into %T", v)
		}
		if b, ok := r.(*bodyReader); ok {
			*dst = b.Bytes()
			return nil
		}
		data, err := io.ReadAll(r)
		if err != nil {
			return err
		}
		*dst = data
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

// bodyReader is a request body the front handler has already read and
// checked: a reader over its bytes, which rawJSON's decoder takes whole,
// without a copy.
type bodyReader struct{ data []byte }

// Read implements io.Reader.
func (b *bodyReader) Read(p []byte) (int, error) {
	if len(b.data) == 0 {
		return 0, io.EOF
	}
	n := copy(p, b.data)
	b.data = b.data[n:]
	return n, nil
}

// Close implements io.Closer.
func (*bodyReader) Close() error { return nil }

// Bytes returns the bytes not read yet, which are then consumed.
func (b *bodyReader) Bytes() []byte {
	d := b.data
	b.data = nil
	return d
}
