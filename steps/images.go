package steps

import (
	"github.com/coordinator-project/coordinator/internal/jsonbody"
)

// imagePart is one image_url content part of a chat body.
type imagePart struct {
	// Part is the content part object; ImageURL its "image_url" object.
	// Read them only: edit through editImage.
	Part     *jsonbody.Object
	ImageURL *jsonbody.Object
	// URL is image_url.url. It may alias the client's body.
	URL string
	// Message and Content locate the part: messages[Message].content[Content].
	Message, Content int
}

// imageLoc locates an image part: messages[message].content[content].
type imageLoc struct{ message, content int }

// imageLocs finds the image parts of a chat document, in document order,
// once. An image part is a content part object with "type": "image_url"
// whose "image_url" is an object with a string "url"; other shapes are
// skipped, as the reference does. Steps never add or remove parts, so the
// locations hold for the document as it stands and every leg of it.
func (d *Document) imageLocs() []imageLoc {
	if d.imagesDone {
		return d.images
	}
	d.imagesDone = true
	msgs := d.root.Array("messages")
	if d.format != FormatChat || msgs == nil {
		return nil
	}
	for mi := range msgs.Len() {
		msg := msgs.Object(mi)
		if msg == nil || msg.Array("content") == nil {
			continue
		}
		content := msg.Array("content")
		for ci := range content.Len() {
			if _, ok := imagePartOf(content.Object(ci)); ok {
				d.images = append(d.images, imageLoc{mi, ci})
			}
		}
	}
	return d.images
}

// imagePartOf reads part as an image part.
func imagePartOf(part *jsonbody.Object) (imagePart, bool) {
	if part == nil {
		return imagePart{}, false
	}
	if typ, ok := part.String("type"); !ok || typ != "image_url" {
		return imagePart{}, false
	}
	image := part.Object("image_url")
	if image == nil {
		return imagePart{}, false
	}
	url, ok := image.String("url")
	if !ok {
		return imagePart{}, false
	}
	return imagePart{Part: part, ImageURL: image, URL: url}, true
}

// forEachImage calls fn for each image part of root (the document's root
// or a leg of it), in document order, with k counting image parts from 0.
func (d *Document) forEachImage(root *jsonbody.Object, fn func(k int, p imagePart) error) error {
	for k, loc := range d.imageLocs() {
		p, _ := imagePartOf(root.Array("messages").Object(loc.message).Array("content").Object(loc.content))
		p.Message, p.Content = loc.message, loc.content
		if err := fn(k, p); err != nil {
			return err
		}
	}
	return nil
}

// editImage returns the k-th image part of root (the document's root or a
// leg of it) and its image_url object for editing, copied along the way
// from root so that nothing sharing them sees the edits. The part is
// rewritten whole, its image_url included, as the body is written.
func (d *Document) editImage(root *jsonbody.Object, k int) (part, imageURL *jsonbody.Object) {
	loc := d.imageLocs()[k]
	part = root.EditArray("messages").EditObject(loc.message).EditArray("content").EditObject(loc.content)
	imageURL = part.EditObject("image_url")
	imageURL.Touch()
	return part, imageURL
}
