// Package features holds the vLLM "features" JSON of a prompt's images,
// written and read in one place: the features object every leg and the
// service's gRPC tokens body carry (mm_hashes, mm_placeholders and,
// with tensors, kwargs_data), the chat "tokens" extension that wraps it,
// and the parser of a features value (render's answer, or a tokens-in
// client's body) with the checks its placeholders must pass.
package features

import "encoding/json"

// MultimodalEntry is one image of the prompt.
type MultimodalEntry struct {
	// Index is the image's position among the body's image parts.
	Index int
	// Hash is the render service's content hash (mm_hash); "" until render.
	Hash string
	// ContentType and Base64Data hold an inlined image.
	ContentType string
	Base64Data  string
	// KwargsData is the preprocessed tensor as raw JSON: a string, or null
	// when the worker resolves it from its encoder cache.
	KwargsData json.RawMessage
	// Placeholder locates the image's placeholder tokens in the prompt.
	Placeholder Placeholder
}

// Placeholder is a run of placeholder tokens in the prompt.
type Placeholder struct {
	Offset int `json:"offset"`
	Length int `json:"length"`
}
