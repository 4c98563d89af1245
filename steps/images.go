package steps

import (
	"github.com/coordinator-project/coordinator/internal/jsonbody"
)

// imagePart is one image_url content part of a chat body.
type imagePart struct {
	// Part is the content part object; ImageURL its "image_url" object.
	Part     *jsonbody.Object
	ImageURL *jsonbody.Object
	// URL is image_url.url.
	URL string
	// Message and Content locate the part: messages[Message].content[Content].
	Message, Content int
}

// editImageParts calls fn for each image part of a chat body, in document
// order, with k counting image parts from 0. An image part is a content
// part object with "type": "image_url" whose "image_url" is an object with
// a string "url"; other shapes are skipped, as the reference does. When fn
// reports a change, the part (fn edits p.Part, and p.ImageURL which is
// written back into it) is re-serialised into obj; nothing else is.
func editImageParts(obj *jsonbody.Object, fn func(k int, p *imagePart) (changed bool, err error)) error {
	rawMessages, ok := obj.Get("messages")
	if !ok {
		return nil
	}
	messages, err := jsonbody.ParseArray(rawMessages)
	if err != nil {
		return nil // not an array: no images
	}
	k := 0
	messagesChanged := false
	for mi, rawMsg := range messages {
		msg, err := jsonbody.ParseObject(rawMsg)
		if err != nil {
			continue
		}
		rawContent, ok := msg.Get("content")
		if !ok {
			continue
		}
		content, err := jsonbody.ParseArray(rawContent)
		if err != nil {
			continue
		}
		contentChanged := false
		for pi, rawPart := range content {
			p, ok := parseImagePart(rawPart)
			if !ok {
				continue
			}
			p.Message, p.Content = mi, pi
			changed, err := fn(k, p)
			k++
			if err != nil {
				return err
			}
			if changed {
				p.Part.Set("image_url", p.ImageURL.Bytes())
				content[pi] = p.Part.Bytes()
				contentChanged = true
			}
		}
		if contentChanged {
			msg.Set("content", appendArray(nil, content))
			messages[mi] = msg.Bytes()
			messagesChanged = true
		}
	}
	if messagesChanged {
		obj.Set("messages", appendArray(nil, messages))
	}
	return nil
}

// forEachImagePart visits the image parts read-only.
func forEachImagePart(obj *jsonbody.Object, fn func(k int, p *imagePart) error) error {
	return editImageParts(obj, func(k int, p *imagePart) (bool, error) {
		return false, fn(k, p)
	})
}

func parseImagePart(raw []byte) (*imagePart, bool) {
	part, err := jsonbody.ParseObject(raw)
	if err != nil {
		return nil, false
	}
	typ, ok := part.Get("type")
	if !ok {
		return nil, false
	}
	if s, ok := jsonbody.String(typ); !ok || s != "image_url" {
		return nil, false
	}
	rawImage, ok := part.Get("image_url")
	if !ok {
		return nil, false
	}
	image, err := jsonbody.ParseObject(rawImage)
	if err != nil {
		return nil, false
	}
	rawURL, ok := image.Get("url")
	if !ok {
		return nil, false
	}
	url, ok := jsonbody.String(rawURL)
	if !ok {
		return nil, false
	}
	return &imagePart{Part: part, ImageURL: image, URL: url}, true
}

// appendArray writes a JSON array of raw elements.
func appendArray(dst []byte, elems [][]byte) []byte {
	dst = append(dst, '[')
	for i, e := range elems {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, e...)
	}
	return append(dst, ']')
}
