package builtin

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/internal/requestbody"
	"github.com/coordinator-project/coordinator/internal/wire/features"
	"github.com/coordinator-project/coordinator/internal/wire/legs"
	"github.com/coordinator-project/coordinator/steps"
)

// FuzzDocument checks the request document against encoding/json on chat
// bodies: parsed and written with no edits it gives back the client's exact
// bytes; the decode leg (kv_transfer_params, the tokens extension, a uuid on
// every image part) and the chat prefill leg (capped to one token) hold what
// the same edits made on an encoding/json decoding of the body hold; and
// neither leg's edits reach the document.
func FuzzDocument(f *testing.F) {
	for _, seed := range []string{
		`{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
		` {"model": "m", "stream": true, "max_tokens": 9, "min_tokens": 2, "stream_options": {"include_usage": true},` +
			` "messages": [{"role": "user", "content": [{"type": "text", "text": "caf\u00e9"},` +
			` {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA==", "detail": "low"}},` +
			` {"type": "image_url", "image_url": {"url": "x"}, "uuid": "client"}]}]} `,
		`{"messages":[{"content":[{"type":"image_url","image_url":{"url":1}},{"type":"image_url"}]},"x",{"content":[]}],"max_output_tokens":3}`,
		`{"messages":[{"content":[{"t\u0079pe":"image_url","image_url":{"url":"a"},"type":"text"}]}],"messages":[{"content":[{"type":"image_url","image_url":{"url":"b","url":"c"}}]}]}`,
		`{"messages":[{"content":[{"image_url":"a"},{"type":null,"image_url":{"url":"b"}},{"type":"input_image","image_url":"c"},` +
			`{"input_audio":null,"image_url":"d"},{"video_url":"v","image_url":"e"},{"type":"text","uuid":"u","image_url":"f"}]}]}`,
		`{}`, `[]`, `{"messages":null}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		doc, err := requestbody.Parse(body, legs.FormatChat)
		if err != nil {
			return
		}
		require.Equal(t, string(body), string(bytes.Join(doc.Write(doc.Root()), nil)), "no edits: the client's bytes")
		var want map[string]any
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.UseNumber()
		require.NoError(t, dec.Decode(&want))
		parts := imagePartsOf(want)
		rc := &steps.RequestContext{Format: legs.FormatChat, Body: body, Doc: doc, Tokens: requestbody.NewTokens([]uint32{1, 2, 3})}
		for k := range parts {
			rc.Multimodal = append(rc.Multimodal, features.MultimodalEntry{Index: k, Hash: fmt.Sprintf("h%d", k), Placeholder: features.Placeholder{Offset: k, Length: 1}})
		}
		tokens := map[string]any{"token_ids": []any{json.Number("1"), json.Number("2"), json.Number("3")}}
		if len(parts) > 0 {
			tokens = decodeNumbers(t, rc.TokensExtension())
		}

		leg, err := decodeBody(rc, []byte(`{"x":1}`), true)
		require.NoError(t, err)
		decode := cloneJSON(t, want)
		decode["kv_transfer_params"] = map[string]any{"x": json.Number("1")}
		decode["tokens"] = tokens
		for k, p := range imagePartsOf(decode) {
			p["uuid"] = fmt.Sprintf("h%d", k)
		}
		assert.Equal(t, decode, decodeNumbers(t, bytes.Join(leg, nil)), "the decode leg")

		leg, err = prefillBody(rc, legs.FormatChat, []byte(`{"y":2}`), nil)
		require.NoError(t, err)
		prefill := cloneJSON(t, want)
		prefill["max_tokens"] = json.Number("1")
		for _, key := range []string{"max_completion_tokens", "max_output_tokens"} {
			if _, ok := prefill[key]; ok {
				prefill[key] = json.Number("1")
			}
		}
		delete(prefill, "min_tokens")
		delete(prefill, "stream_options")
		prefill["stream"] = false
		prefill["tokens"] = tokens
		prefill["kv_transfer_params"] = map[string]any{"y": json.Number("2")}
		assert.Equal(t, prefill, decodeNumbers(t, bytes.Join(leg, nil)), "the prefill leg")

		assert.Equal(t, string(body), string(doc.Bytes()), "the legs' edits do not reach the document")
	})
}

// imagePartsOf is the image parts of a decoded chat body, in order, by the
// rule imageparts.Find applies to the raw document.
func imagePartsOf(body map[string]any) []map[string]any {
	var out []map[string]any
	msgs, _ := body["messages"].([]any)
	for _, m := range msgs {
		msg, _ := m.(map[string]any)
		content, _ := msg["content"].([]any)
		for _, c := range content {
			if part, _ := c.(map[string]any); isImagePart(part) {
				out = append(out, part)
			}
		}
	}
	return out
}

// isImagePart is imageparts' rule for a chat part, after vLLM's
// (imageparts/vllm_test.go): an image_url or input_image part, or one
// with no type, whose first media key is image_url, a string URL in the
// form its type takes (either form with no type).
func isImagePart(part map[string]any) bool {
	kind := ""
	if typ, ok := part["type"]; ok && typ != nil {
		kind, _ = typ.(string)
		if kind != "image_url" && kind != "input_image" {
			return false
		}
	}
	for _, k := range []string{"image_url", "image_pil", "image_embeds", "audio_embeds", "prompt_embeds", "audio_url", "input_audio", "video_url"} {
		if v, ok := part[k]; ok && (k != "input_audio" || v != nil) {
			if k != "image_url" {
				return false
			}
			break
		}
	}
	switch v := part["image_url"].(type) {
	case map[string]any:
		_, ok := v["url"].(string)
		return ok && kind != "input_image"
	case string:
		return kind != "image_url"
	}
	return false
}

func decodeNumbers(t *testing.T, raw []byte) map[string]any {
	t.Helper()
	var v map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	require.NoError(t, dec.Decode(&v), "%s", raw)
	require.False(t, dec.More(), "one document: %s", raw)
	return v
}

func cloneJSON(t *testing.T, v map[string]any) map[string]any {
	t.Helper()
	raw, err := json.Marshal(v)
	require.NoError(t, err)
	return decodeNumbers(t, raw)
}
