package features

import (
	"errors"
	"fmt"
	"math"

	"github.com/coordinator-project/coordinator/internal/jsonbody"
)

// modalityImage is the only modality the coordinator handles: other keys of
// the features maps are ignored.
const modalityImage = "image"

// Index indexes a features value for Parse (jsonbody.ParseIndexed): its
// image hashes, placeholders and tensors.
var Index = &jsonbody.Index{Members: map[string]*jsonbody.Index{
	"mm_hashes":       {Members: map[string]*jsonbody.Index{modalityImage: {}}},
	"mm_placeholders": {Members: map[string]*jsonbody.Index{modalityImage: {Elements: &jsonbody.Index{}}}},
	"kwargs_data":     {Members: map[string]*jsonbody.Index{modalityImage: {}}},
}}

// jsonNull is the raw JSON literal null.
var jsonNull = []byte("null")

// Parse reads the image entries of a vLLM GenerateRequest
// "features" value: render's answer to a chat render, or the client's body on
// /inference/v1/generate. raw is the value's JSON text, nil when absent, and
// features the value indexed with Index (nil when it is not an
// object):
//
//	{"mm_hashes":       {"image": ["h0", ...]},
//	 "mm_placeholders": {"image": [{"offset": 4, "length": 2}, ...]},
//	 "kwargs_data":     {"image": ["<base64 tensor>" | null, ...]}}
//
// A text-only value gives no entries: features, mm_hashes or mm_hashes.image
// absent or null, or an empty mm_hashes.image. Once mm_hashes.image has
// items, mm_placeholders.image is required and parallel to it; kwargs_data is
// optional (absent: every image comes from the worker's encoder cache) and
// parallel when present. Entry i gets Index i, the i-th hash and placeholder,
// and the i-th kwargs item as raw JSON (a string that aliases raw, or null).
//
// Any present value of the wrong shape is an error, never taken as absent.
// Errors are plain: the caller decides whose fault the value is.
func Parse(raw []byte, features *jsonbody.Object) ([]MultimodalEntry, error) {
	if raw == nil || jsonbody.IsNull(raw) {
		return nil, nil
	}
	if features == nil {
		return nil, errors.New("features must be an object")
	}
	hashes, ok, err := imageArray(features, "mm_hashes")
	if err != nil || !ok || hashes.Len() == 0 {
		return nil, err
	}
	placeholders, ok, err := imageArray(features, "mm_placeholders")
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, errors.New("mm_placeholders.image is required when mm_hashes.image is set")
	}
	kwargs, hasKwargs, err := imageArray(features, "kwargs_data")
	if err != nil {
		return nil, err
	}
	n := hashes.Len()
	if placeholders.Len() != n {
		return nil, fmt.Errorf("features length mismatch: mm_hashes.image has %d, mm_placeholders.image has %d", n, placeholders.Len())
	}
	if hasKwargs && kwargs.Len() != n {
		return nil, fmt.Errorf("features length mismatch: mm_hashes.image has %d, kwargs_data.image has %d", n, kwargs.Len())
	}
	entries := make([]MultimodalEntry, n)
	for i := range entries {
		hash, ok := jsonbody.String(hashes.Elem(i))
		if !ok {
			return nil, fmt.Errorf("mm_hashes.image[%d] must be a string", i)
		}
		p, err := parsePlaceholder(placeholders.Object(i))
		if err != nil {
			return nil, fmt.Errorf("mm_placeholders.image[%d]%w", i, err)
		}
		tensor := jsonNull
		if hasKwargs {
			tensor = kwargs.Elem(i)
			if tensor[0] != '"' && !jsonbody.IsNull(tensor) {
				return nil, fmt.Errorf("kwargs_data.image[%d] must be a string or null", i)
			}
		}
		entries[i] = MultimodalEntry{Index: i, Hash: hash, KwargsData: tensor, Placeholder: p}
	}
	return entries, nil
}

// imageArray returns features[field].image, indexed. present is false
// when field or its image member is absent or null; a present value of
// another shape is an error.
func imageArray(features *jsonbody.Object, field string) (elems *jsonbody.Array, present bool, err error) {
	raw, ok := features.Get(field)
	if !ok || jsonbody.IsNull(raw) {
		return nil, false, nil
	}
	byModality := features.Object(field)
	if byModality == nil {
		return nil, false, fmt.Errorf("%s must be an object", field)
	}
	raw, ok = byModality.Get(modalityImage)
	if !ok || jsonbody.IsNull(raw) {
		return nil, false, nil
	}
	elems = byModality.Array(modalityImage)
	if elems == nil {
		return nil, false, fmt.Errorf("%s.%s must be an array", field, modalityImage)
	}
	return elems, true, nil
}

// parsePlaceholder reads {"offset": o, "length": l} (indexed; nil when it
// is not an object) with o and l non-negative integers. Its errors start
// with the member they are about (".offset ...") or with a space.
func parsePlaceholder(obj *jsonbody.Object) (Placeholder, error) {
	if obj == nil {
		return Placeholder{}, errors.New(" must be an object")
	}
	offset, ok := nonNegativeInt(obj, "offset")
	if !ok {
		return Placeholder{}, errors.New(".offset must be a non-negative integer")
	}
	length, ok := nonNegativeInt(obj, "length")
	if !ok {
		return Placeholder{}, errors.New(".length must be a non-negative integer")
	}
	return Placeholder{Offset: offset, Length: length}, nil
}

// nonNegativeInt reads obj[key] as an integer in [0, MaxInt].
func nonNegativeInt(obj *jsonbody.Object, key string) (int, bool) {
	raw, ok := obj.Get(key)
	if !ok {
		return 0, false
	}
	v, ok := jsonbody.Int(raw)
	if !ok || v < 0 || v > math.MaxInt {
		return 0, false
	}
	return int(v), true
}

// CheckBounds checks that every placeholder run lies inside a
// prompt of tokenCount tokens: offset < tokenCount and offset+length <=
// tokenCount (computed without overflow). Client-supplied geometry is
// checked before any step indexes the prompt or allocates from a length.
func CheckBounds(entries []MultimodalEntry, tokenCount int) error {
	for i, e := range entries {
		off, length := e.Placeholder.Offset, e.Placeholder.Length
		if off < 0 || off >= tokenCount {
			return fmt.Errorf("mm_placeholders.image[%d].offset %d out of range for %d token_ids", i, off, tokenCount)
		}
		if length < 0 || length > tokenCount-off {
			return fmt.Errorf("mm_placeholders.image[%d] (offset %d, length %d) exceeds %d token_ids", i, off, length, tokenCount)
		}
	}
	return nil
}

// PlaceholderTotal sums the placeholder lengths, saturating at MaxInt so an
// overflowing sum still exceeds any limit.
func PlaceholderTotal(entries []MultimodalEntry) int {
	total := 0
	for _, e := range entries {
		if e.Placeholder.Length > math.MaxInt-total {
			return math.MaxInt
		}
		total += e.Placeholder.Length
	}
	return total
}
