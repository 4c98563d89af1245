package steps

import (
	"strconv"

	"github.com/coordinator-project/coordinator/internal/jsonbody"
)

// Body keys the steps own.
const (
	keyKVTransferParams = "kv_transfer_params"
	keyECTransferParams = "ec_transfer_params"
	keySamplingParams   = "sampling_params"
	keyExtraArgs        = "extra_args"
	keyTokens           = "tokens"
	keyPrompt           = "prompt"
)

// appendTokens writes the chat "tokens" extension object:
// {"token_ids":[...],"features":{"mm_hashes":...,"mm_placeholders":...}},
// with ids the token IDs' JSON. features is present only when there are
// images.
func appendTokens(dst, ids []byte, images []MultimodalEntry) []byte {
	dst = append(dst, `{"token_ids":`...)
	dst = append(dst, ids...)
	if len(images) > 0 {
		dst = append(dst, `,"features":`...)
		dst = AppendFeatures(dst, images, false)
	}
	return append(dst, '}')
}

// tokensExtension is a request's chat "tokens" extension, written once for
// every leg that carries it, and what it was written from.
type tokensExtension struct {
	json   []byte
	ids    []byte
	images []MultimodalEntry
}

// tokensExtension returns rc's chat "tokens" extension (appendTokens of
// its Tokens and Multimodal): written on first use, and again only when a
// step has since replaced rc.Tokens or rc.Multimodal.
func (rc *RequestContext) tokensExtension() []byte {
	ids := rc.Tokens.JSON()
	c := &rc.tokensExt
	if c.json != nil && sameMemory(c.ids, ids) && sameEntries(c.images, rc.Multimodal) {
		return c.json
	}
	size := len(ids) + 96 // the members' names and braces, the features' too
	for _, e := range rc.Multimodal {
		size += 64 + len(e.Hash) // a hash and a placeholder
	}
	c.json = appendTokens(make([]byte, 0, size), ids, rc.Multimodal)
	c.ids, c.images = ids, rc.Multimodal
	return c.json
}

// sameMemory reports whether a and b are the same bytes in memory.
func sameMemory(a, b []byte) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// sameEntries reports whether a and b are the same slice.
func sameEntries(a, b []MultimodalEntry) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// AppendFeatures writes a features object for images: mm_hashes and
// mm_placeholders, and kwargs_data when withKwargs (an empty tensor is
// written as null, the worker's "from the encoder cache" sentinel). It is
// the one writer of features: of every leg, and of the body the service
// builds for a gRPC tokens request.
func AppendFeatures(dst []byte, images []MultimodalEntry, withKwargs bool) []byte {
	w := &flatWriter{b: dst}
	writeFeatures(w, images, withKwargs)
	return w.b
}

// appendFeatureSegments is AppendFeatures with tensors, each kept by
// reference when long.
func appendFeatureSegments(s *jsonbody.Segments, images []MultimodalEntry) {
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
