// Package imageparts finds the image parts of a chat body (its
// image_url content parts) once, and reads or edits them in the body or in
// any leg of it by their place.
package imageparts

import (
	"github.com/coordinator-project/coordinator/internal/jsonbody"
)

// Index indexes a chat body for Find (jsonbody.ParseIndexed): its messages
// down to each content part's image_url.
var Index = &jsonbody.Index{Members: map[string]*jsonbody.Index{
	"messages": {Elements: &jsonbody.Index{Members: map[string]*jsonbody.Index{
		"content": {Elements: &jsonbody.Index{Members: map[string]*jsonbody.Index{
			"image_url": {},
		}}},
	}}},
}}

// Part is one image_url content part of a chat body.
type Part struct {
	// Part is the content part object; ImageURL its "image_url" object.
	// Read them only: edit through Locations.Edit.
	Part     *jsonbody.Object
	ImageURL *jsonbody.Object
	// URL is image_url.url. It may alias the client's body.
	URL string
	// Message and Content locate the part: messages[Message].content[Content].
	Message, Content int
}

// Locations locates the image parts of a chat body, in document order:
// the k-th image part is at Locations[k].
type Locations []location

// location locates an image part: messages[message].content[content].
type location struct{ message, content int }

// Find finds the image parts of root, a chat body indexed with Index (at
// least), in document order. An image part is a content
// part object with "type": "image_url" whose "image_url" is an object with
// a string "url"; other shapes are skipped, as the reference does. Steps
// never add or remove parts, so the locations hold for the body as it
// stands and every leg of it.
func Find(root *jsonbody.Object) Locations {
	msgs := root.Array("messages")
	if msgs == nil {
		return nil
	}
	var locs Locations
	for mi := range msgs.Len() {
		msg := msgs.Object(mi)
		if msg == nil || msg.Array("content") == nil {
			continue
		}
		content := msg.Array("content")
		for ci := range content.Len() {
			if _, ok := partOf(content.Object(ci)); ok {
				locs = append(locs, location{mi, ci})
			}
		}
	}
	return locs
}

// partOf reads part as an image part.
func partOf(part *jsonbody.Object) (Part, bool) {
	if part == nil {
		return Part{}, false
	}
	if typ, ok := part.String("type"); !ok || typ != "image_url" {
		return Part{}, false
	}
	image := part.Object("image_url")
	if image == nil {
		return Part{}, false
	}
	url, ok := image.String("url")
	if !ok {
		return Part{}, false
	}
	return Part{Part: part, ImageURL: image, URL: url}, true
}

// Each calls fn for each image part of root (the body the locations were
// found in, or a leg of it), in document order, with k counting image parts
// from 0; it stops at fn's first error and returns it.
func (l Locations) Each(root *jsonbody.Object, fn func(k int, p Part) error) error {
	for k, loc := range l {
		p, _ := partOf(root.Array("messages").Object(loc.message).Array("content").Object(loc.content))
		p.Message, p.Content = loc.message, loc.content
		if err := fn(k, p); err != nil {
			return err
		}
	}
	return nil
}

// Edit returns the k-th image part of root (the body the locations were
// found in, or a leg of it) and its image_url object for editing, copied
// along the way from root so that nothing sharing them sees the edits. The
// part is rewritten whole, its image_url included, as the body is written.
func (l Locations) Edit(root *jsonbody.Object, k int) (part, imageURL *jsonbody.Object) {
	loc := l[k]
	part = root.EditArray("messages").EditObject(loc.message).EditArray("content").EditObject(loc.content)
	imageURL = part.EditObject("image_url")
	imageURL.Touch()
	return part, imageURL
}
