package imageparts

import (
	"errors"
	"fmt"

	"github.com/coordinator-project/coordinator/internal/jsonbody"
)

// How vLLM reads a chat or Responses content part (vllm-project/vllm,
// vllm/entrypoints/chat_utils.py, _parse_chat_message_content_mm_part): a
// part whose "type" is one of MM_PARSER_MAP's and that has no "uuid" is
// read by its type; a part with no type (missing or null), or with a
// "uuid", is typed by the first of mediaKeys it has. The coordinator owns
// "uuid" (it writes each image's hash there for the workers' cache), so a
// part it takes for an image may reach vLLM with a uuid, and be typed by
// its keys, or without one, and be typed by its type: both readings must
// be the same image. A client's own uuid is removed (DropUUIDs).

// mediaKeys are the members vLLM types an untyped part by, in its order.
var mediaKeys = [...]string{
	"image_url", "image_pil", "image_embeds", "audio_embeds", "prompt_embeds",
	"audio_url", "input_audio", "video_url",
}

// imageTypes are the media types whose content is an image URL: chat's
// {"image_url":{"url"}} and Responses' {"image_url":<string>}; vLLM reads
// either form when it types a part by its keys.
var imageTypes = [...]string{"image_url", "input_image"}

// refusedKinds are the media vLLM reads that the pipeline cannot guard,
// each with why: render, the encode legs and the uuid hashes know images
// by URL only, so these would pass the SSRF guard and the multimodal cap.
var refusedKinds = map[string]string{
	"image_pil":     "not an image URL",
	"image_embeds":  "embeddings skip the coordinator's encode and multimodal cap",
	"audio_embeds":  "embeddings skip the coordinator's encode and multimodal cap",
	"prompt_embeds": "embeddings skip the coordinator's render",
	"audio_url":     "the coordinator downloads and checks images only",
	"input_audio":   "the coordinator checks images only",
	"video_url":     "the coordinator downloads and checks images only",
}

// partIndex keeps, of a chat or Responses content array, the parts with a
// member vLLM may read as media, a media type, or a uuid
// (jsonbody.Index.Sparse).
var partIndex = func() *jsonbody.Index {
	m := map[string]*jsonbody.Index{keyUUID: {}}
	for _, k := range mediaKeys {
		m[k] = &jsonbody.Index{}
	}
	types := imageTypes[:]
	for k := range refusedKinds {
		types = append(types, k)
	}
	m["type"] = &jsonbody.Index{Strings: types}
	return &jsonbody.Index{Members: m}
}()

// keyUUID is the part member vLLM takes as the media's cache key.
const keyUUID = "uuid"

// mediaKind is what vLLM reads part as: a media type ("image_url",
// "video_url", ...), or "" for a part that is not media. It is the kind by
// the part's type when that is a media type, else by its keys when it
// has no type; a part typed as something else is not media once its uuid
// is gone.
func mediaKind(part *jsonbody.Object) string {
	if hasType(part) {
		typ, _ := part.String("type")
		if isMediaType(typ) {
			return typ
		}
		return ""
	}
	return kindByKeys(part)
}

// kindByKeys is the first of mediaKeys part has, as vLLM types a part with
// no type or with a uuid; input_audio counts only when not null.
func kindByKeys(part *jsonbody.Object) string {
	for _, k := range mediaKeys {
		raw, ok := part.Get(k)
		if ok && (k != "input_audio" || !jsonbody.IsNull(raw)) {
			return k
		}
	}
	return ""
}

// isMediaType reports a type MM_PARSER_MAP reads as media.
func isMediaType(typ string) bool {
	for _, t := range imageTypes {
		if typ == t {
			return true
		}
	}
	_, ok := refusedKinds[typ]
	return ok
}

// chatPart reads part, a chat or Responses content part, as an image part
// with a string URL; err refuses a media part the pipeline cannot guard.
func chatPart(part *jsonbody.Object) (p Part, ok bool, err error) {
	kind := mediaKind(part)
	if why, refused := refusedKinds[kind]; refused {
		return Part{}, false, fmt.Errorf("content part of type %s is not supported: %s", kind, why)
	}
	if kind == "" {
		return Part{}, false, nil
	}
	// An image typed by its type must be the same image typed by its keys
	// (with the coordinator's uuid): its image_url, then, is the first
	// media key it has.
	if by := kindByKeys(part); by != "image_url" {
		if _, refused := refusedKinds[by]; refused {
			return Part{}, false, fmt.Errorf("content part of type %s carries %s: send one medium per part", kind, by)
		}
		return Part{}, false, nil
	}
	p = Part{Part: part, ImageURL: part.Object("image_url")}
	if p.ImageURL != nil {
		p.URL, ok = p.ImageURL.String("url")
	} else {
		p.URL, ok = part.String("image_url")
	}
	if !ok {
		return Part{}, false, nil // no URL either way vLLM reads it
	}
	// vLLM reads a typed part's image_url in its type's form only; with
	// a uuid, in either form: refuse what would flip.
	if kind == "image_url" && p.ImageURL == nil && hasType(part) {
		return Part{}, false, errors.New("content part of type image_url: image_url must be an object with a url")
	}
	if kind == "input_image" && p.ImageURL != nil {
		return Part{}, false, errors.New("content part of type input_image: image_url must be a string")
	}
	return p, true, nil
}

// hasType reports a part whose type is set (not missing, not null).
func hasType(part *jsonbody.Object) bool {
	raw, ok := part.Get("type")
	return ok && !jsonbody.IsNull(raw)
}
