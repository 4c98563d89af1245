package imageparts_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/internal/jsonbody"
	"github.com/coordinator-project/coordinator/internal/wire/imageparts"
)

// vllmPart is how vLLM reads a chat (or Responses) content part, modelled
// here from its source, independently of the package: vllm-project/vllm,
// vllm/entrypoints/chat_utils.py (commit 001eadcf295d90aa0664963cd6a9d93f38a2f3da),
// _parse_chat_message_content_mm_part and MM_PARSER_MAP. A part whose
// "type" is a string of MM_PARSER_MAP and that has no "uuid" is read by
// its type; one with no type (missing or null) or with a uuid is typed by
// the first key it has of image_url, image_pil, image_embeds,
// audio_embeds, prompt_embeds, audio_url, input_audio (when not null),
// video_url; image_url, audio_url and video_url there may be a string or
// {"url"}. It returns the media kind ("" for none) and, for an image, its
// URL when that is a string.
func vllmPart(part map[string]any) (kind, url string) {
	typ, typed := part["type"].(string)
	uuid := part["uuid"]
	if typed && uuid == nil {
		switch typ {
		case "image_url": // ChatCompletionContentPartImageParam: image_url {"url": str}
			m, _ := part["image_url"].(map[string]any)
			url, _ = m["url"].(string)
			return typ, url
		case "input_image": // ResponseInputImageParam: image_url str
			url, _ = part["image_url"].(string)
			return typ, url
		case "image_embeds", "audio_embeds", "prompt_embeds", "image_pil", "audio_url", "input_audio", "video_url":
			return typ, ""
		}
		return "", "" // text, refusal, thinking, ...: not media
	}
	if part["type"] != nil && uuid == nil {
		return "", "" // a type vLLM does not know: not media
	}
	for _, k := range []string{"image_url", "image_pil", "image_embeds", "audio_embeds", "prompt_embeds", "audio_url", "input_audio", "video_url"} {
		v, ok := part[k]
		if !ok || (k == "input_audio" && v == nil) {
			continue
		}
		if k == "image_url" {
			if m, isMap := v.(map[string]any); isMap {
				v = m["url"]
			}
			url, _ = v.(string)
		}
		return k, url
	}
	return "", ""
}

// vllmShapes are the part shapes vLLM's parser takes (the TypedDicts of
// chat_utils.py and the OpenAI ones it imports), and what the
// coordinator does with each: the image's URL, or a refusal ("!"), or
// nothing ("").
var vllmShapes = []struct {
	name, part, want string
}{
	{"image_url", `{"type":"image_url","image_url":{"url":"U"}}`, "U"},
	{"image_url with a client uuid", `{"type":"image_url","image_url":{"url":"U"},"uuid":"c"}`, "U"},
	{"simple image_url (no type)", `{"image_url":"U"}`, "U"},
	{"image_url object, no type", `{"image_url":{"url":"U"}}`, "U"},
	{"type null", `{"type":null,"image_url":"U"}`, "U"},
	{"input_image", `{"type":"input_image","image_url":"U"}`, "U"},
	{"input_image with an object", `{"type":"input_image","image_url":{"url":"U"}}`, "!"},
	{"image_url with a string", `{"type":"image_url","image_url":"U"}`, "!"},
	{"text with uuid and image_url", `{"type":"text","text":"t","uuid":"c","image_url":"U"}`, ""},
	{"text with image_url", `{"type":"text","text":"t","image_url":{"url":"U"}}`, ""},
	{"image_url beside video_url", `{"type":"image_url","image_url":{"url":"U"},"video_url":{"url":"V"}}`, "U"},
	{"null input_audio then image_url", `{"input_audio":null,"image_url":"U"}`, "U"},
	{"video_url", `{"type":"video_url","video_url":{"url":"V"}}`, "!"},
	{"simple video_url", `{"video_url":"V"}`, "!"},
	{"video_url typed, image_url key", `{"type":"video_url","image_url":{"url":"U"}}`, "!"},
	{"audio_url", `{"type":"audio_url","audio_url":{"url":"A"}}`, "!"},
	{"simple audio_url", `{"audio_url":{"url":"A"}}`, "!"},
	{"input_audio", `{"type":"input_audio","input_audio":{"data":"AA==","format":"wav"}}`, "!"},
	{"input_audio, no type", `{"input_audio":{"data":"AA==","format":"wav"}}`, "!"},
	{"image_embeds", `{"type":"image_embeds","image_embeds":"AA=="}`, "!"},
	{"image_embeds, no type, uuid", `{"image_embeds":null,"uuid":"c"}`, "!"},
	{"audio_embeds", `{"type":"audio_embeds","audio_embeds":{"a":"AA=="}}`, "!"},
	{"prompt_embeds", `{"type":"prompt_embeds","data":"AA=="}`, "!"},
	{"image_pil", `{"image_pil":null,"uuid":"c"}`, "!"},
	{"text", `{"type":"text","text":"t"}`, ""},
	{"file", `{"type":"file","file":{"file_data":"AA=="}}`, ""},
	{"image_url without one", `{"type":"image_url","uuid":"c"}`, ""},
	{"url not a string", `{"type":"image_url","image_url":{"url":1}}`, ""},
}

// checkAgainstVLLM parses a chat or Responses body of the one content
// part part and checks the property: every part vLLM would read as an
// image with a URL, once the coordinator has dropped the client's uuid
// and with or without the coordinator's own, is located by FindIn with
// that URL, and every other medium vLLM would read is refused by Check.
// It returns what the coordinator did ("!" for a refusal, else the URL
// located, or "").
func checkAgainstVLLM(t *testing.T, s imageparts.Shape, part string) string {
	t.Helper()
	index, list := imageparts.Index, "messages"
	if s == imageparts.Responses {
		index, list = imageparts.ResponsesIndex, "input"
	}
	body := fmt.Sprintf(`{%q:[{"role":"user","content":[%s]}]}`, list, part)
	root, err := jsonbody.ParseIndexed([]byte(body), index)
	if err != nil {
		return ""
	}
	if imageparts.Check(root, s) != nil {
		return "!"
	}
	imageparts.DropUUIDs(root, s)
	locs := imageparts.FindIn(root, s)
	var urls []string
	require.NoError(t, locs.Each(root, func(_ int, p imageparts.Part) error {
		urls = append(urls, p.URL)
		return nil
	}))
	withUUID := root.Clone()
	for k := range locs {
		p, _ := locs.Edit(withUUID, k)
		p.Set("uuid", []byte(`"coordinator"`))
	}
	for _, leg := range []*jsonbody.Object{root, withUUID} {
		var doc map[string]any
		require.NoError(t, json.Unmarshal(leg.Bytes(), &doc))
		p, ok := onlyPart(doc, list)
		if !ok {
			continue // not one part in one message: part broke out
		}
		_, hasClientUUID := p["uuid"]
		assert.False(t, hasClientUUID && leg == root, "the client's uuid is dropped: %s", part)
		kind, url := vllmPart(p)
		switch {
		case kind == "":
		case kind == "image_url" || kind == "input_image":
			if url != "" {
				assert.Equal(t, []string{url}, urls, "vLLM reads an image at %q: %s", url, leg.Bytes())
			}
		default:
			t.Errorf("vLLM reads %s, which the coordinator neither guards nor refused: %s", kind, leg.Bytes())
		}
	}
	if len(urls) == 1 {
		return urls[0]
	}
	return ""
}

// onlyPart is the one content part of the one message of doc's list.
func onlyPart(doc map[string]any, list string) (map[string]any, bool) {
	msgs, _ := doc[list].([]any)
	if len(msgs) != 1 {
		return nil, false
	}
	msg, _ := msgs[0].(map[string]any)
	content, _ := msg["content"].([]any)
	if len(content) != 1 {
		return nil, false
	}
	p, ok := content[0].(map[string]any)
	return p, ok
}

func TestVLLMPartShapes(t *testing.T) {
	t.Parallel()
	for _, tc := range vllmShapes {
		for _, s := range []imageparts.Shape{imageparts.Chat, imageparts.Responses} {
			t.Run(fmt.Sprintf("%s/%d", tc.name, s), func(t *testing.T) {
				t.Parallel()
				assert.Equal(t, tc.want, checkAgainstVLLM(t, s, tc.part))
			})
		}
	}
}

// FuzzMediaPartsAgainstVLLM checks checkAgainstVLLM's property on any
// content part, seeded with vLLM's shapes.
func FuzzMediaPartsAgainstVLLM(f *testing.F) {
	for _, tc := range vllmShapes {
		f.Add(tc.part, false)
	}
	f.Fuzz(func(t *testing.T, part string, responses bool) {
		s := imageparts.Chat
		if responses {
			s = imageparts.Responses
		}
		checkAgainstVLLM(t, s, part)
	})
}
