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
// {"token_ids":[...],"features":{"mm_hashes":...,"mm_placeholders":...}}.
// features is present only when there are images.
func appendTokens(dst []byte, ids []uint32, images []MultimodalEntry) []byte {
	dst = append(dst, `{"token_ids":`...)
	dst = jsonbody.AppendUint32s(dst, ids)
	if len(images) > 0 {
		dst = append(dst, `,"features":`...)
		dst = appendFeatures(dst, images, false)
	}
	return append(dst, '}')
}

// appendFeatures writes a features object for images: mm_hashes and
// mm_placeholders, and kwargs_data when withKwargs (an empty tensor is
// written as null, the worker's "from the encoder cache" sentinel).
func appendFeatures(dst []byte, images []MultimodalEntry, withKwargs bool) []byte {
	dst = append(dst, `{"mm_hashes":{"image":[`...)
	for i, e := range images {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = jsonbody.AppendString(dst, e.Hash)
	}
	dst = append(dst, `]},"mm_placeholders":{"image":[`...)
	for i, e := range images {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendPlaceholder(dst, e.Placeholder)
	}
	dst = append(dst, "]}"...)
	if withKwargs {
		dst = append(dst, `,"kwargs_data":{"image":[`...)
		for i, e := range images {
			if i > 0 {
				dst = append(dst, ',')
			}
			if len(e.KwargsData) == 0 {
				dst = append(dst, "null"...)
			} else {
				dst = append(dst, e.KwargsData...)
			}
		}
		dst = append(dst, "]}"...)
	}
	return append(dst, '}')
}

func appendPlaceholder(dst []byte, p Placeholder) []byte {
	dst = append(dst, `{"offset":`...)
	dst = strconv.AppendInt(dst, int64(p.Offset), 10)
	dst = append(dst, `,"length":`...)
	dst = strconv.AppendInt(dst, int64(p.Length), 10)
	return append(dst, '}')
}

// setNested sets obj[outer][inner][key] = value, creating the two objects
// when they are missing or null and keeping every other field. A present
// outer or inner value that is not an object is a client error.
func setNested(obj *jsonbody.Object, outer, inner, key string, value []byte) error {
	outerObj, err := childObject(obj, outer)
	if err != nil {
		return err
	}
	innerObj, err := childObject(outerObj, inner)
	if err != nil {
		return Invalidf("%s.%s: %v", outer, inner, err)
	}
	innerObj.Set(key, value)
	outerObj.Set(inner, innerObj.Bytes())
	obj.Set(outer, outerObj.Bytes())
	return nil
}

// childObject parses obj[key] as an object; missing or null gives an empty one.
func childObject(obj *jsonbody.Object, key string) (*jsonbody.Object, error) {
	raw, ok := obj.Get(key)
	if !ok || jsonbody.IsNull(raw) {
		raw = []byte("{}")
	}
	child, err := jsonbody.ParseObject(raw)
	if err != nil {
		return nil, Invalidf("%s must be an object", key)
	}
	return child, nil
}
