package features

import (
	"strconv"

	"github.com/coordinator-project/coordinator/internal/jsonbody"
)

// AppendTokens writes the chat "tokens" extension object:
// {"token_ids":[...],"features":{"mm_hashes":...,"mm_placeholders":...}},
// with ids the token IDs' JSON. features is present only when there are
// images.
func AppendTokens(dst, ids []byte, images []MultimodalEntry) []byte {
	dst = append(dst, `{"token_ids":`...)
	dst = append(dst, ids...)
	if len(images) > 0 {
		dst = append(dst, `,"features":`...)
		dst = Append(dst, images, false)
	}
	return append(dst, '}')
}

// Append writes a features object for images: mm_hashes and
// mm_placeholders, and kwargs_data when withKwargs (an empty tensor is
// written as null, the worker's "from the encoder cache" sentinel). It is
// the one writer of features: of every leg, and of the body the service
// builds for a gRPC tokens request.
func Append(dst []byte, images []MultimodalEntry, withKwargs bool) []byte {
	w := &flatWriter{b: dst}
	writeFeatures(w, images, withKwargs)
	return w.b
}

// AppendSegments is Append with tensors, each kept by reference when
// long.
func AppendSegments(s *jsonbody.Segments, images []MultimodalEntry) {
	writeFeatures(s, images, true)
}

// bodyWriter is what writeFeatures writes to: a flat buffer or
// jsonbody.Segments.
type bodyWriter interface {
	Write(p []byte)
	WriteString(p string)
	Ref(p []byte)
}

// flatWriter is a bodyWriter into one slice.
type flatWriter struct{ b []byte }

func (w *flatWriter) Write(p []byte)       { w.b = append(w.b, p...) }
func (w *flatWriter) WriteString(p string) { w.b = append(w.b, p...) }
func (w *flatWriter) Ref(p []byte)         { w.b = append(w.b, p...) }

func writeFeatures(w bodyWriter, images []MultimodalEntry, withKwargs bool) {
	small := make([]byte, 0, 64+80*len(images))
	small = append(small, `{"mm_hashes":{"image":[`...)
	for i, e := range images {
		if i > 0 {
			small = append(small, ',')
		}
		small = jsonbody.AppendString(small, e.Hash)
	}
	small = append(small, `]},"mm_placeholders":{"image":[`...)
	for i, e := range images {
		if i > 0 {
			small = append(small, ',')
		}
		small = appendPlaceholder(small, e.Placeholder)
	}
	small = append(small, "]}"...)
	w.Write(small)
	if withKwargs {
		w.WriteString(`,"kwargs_data":{"image":[`)
		for i, e := range images {
			if i > 0 {
				w.WriteString(",")
			}
			if len(e.KwargsData) == 0 {
				w.WriteString("null")
			} else {
				w.Ref(e.KwargsData)
			}
		}
		w.WriteString("]}")
	}
	w.WriteString("}")
}

func appendPlaceholder(dst []byte, p Placeholder) []byte {
	dst = append(dst, `{"offset":`...)
	dst = strconv.AppendInt(dst, int64(p.Offset), 10)
	dst = append(dst, `,"length":`...)
	dst = strconv.AppendInt(dst, int64(p.Length), 10)
	return append(dst, '}')
}
