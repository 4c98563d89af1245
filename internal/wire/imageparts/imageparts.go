// Package imageparts finds the image parts of a request body once, and
// reads or edits them in the body or in any leg of it by their place. Each
// API keeps them in its own shape (Shape): chat's and the OpenAI
// Responses' content parts, read as vLLM reads them (shapes.go: typed
// image_url and input_image parts, and parts typed by their keys), the
// Anthropic Messages' image blocks. It refuses the media vLLM would read
// that the pipeline cannot guard (Check) and removes a client's uuid
// (DropUUIDs).
package imageparts

import (
	"errors"
	"fmt"

	"github.com/coordinator-project/coordinator/internal/jsonbody"
	"github.com/coordinator-project/coordinator/internal/wire/bodykeys"
)

// Shape is where an API's body keeps its images.
type Shape int

// The shapes.
const (
	// Chat: messages[i].content[j] {"type":"image_url","image_url":{"url"}}.
	Chat Shape = iota
	// Responses: input[i].content[j] {"type":"input_image","image_url":<string>}.
	Responses
	// Messages: messages[i].content[j] {"type":"image","source":
	// {"type":"url","url"} or {"type":"base64","media_type","data"}}.
	Messages
)

// The counts of jsonbody.Limits the indexes count against (Index.Count):
// the messages (Responses: input items) and the content blocks of a body.
const (
	CountMessages = 1 + iota
	CountContentBlocks
)

// messagesOf indexes a body whose list of messages is list, keeping, of
// its messages and their content arrays, only the parts part finds
// something in (jsonbody.Index.Sparse): a body of many small messages or
// parts keeps no object for each.
func messagesOf(list string, part *jsonbody.Index) *jsonbody.Index {
	return &jsonbody.Index{Members: map[string]*jsonbody.Index{
		list: {Sparse: true, Count: CountMessages, Elements: &jsonbody.Index{Members: map[string]*jsonbody.Index{
			"content": {Sparse: true, Count: CountContentBlocks, Elements: part},
		}}},
	}}
}

// Index indexes a chat body for Find (jsonbody.ParseIndexed): its
// messages down to each content part vLLM may read as media or that
// carries a uuid.
var Index = messagesOf(bodykeys.Messages, partIndex)

// ResponsesIndex indexes a Responses body for FindIn as Index does a
// chat body: its input items down to the content parts.
var ResponsesIndex = messagesOf(bodykeys.Input, partIndex)

// MessagesIndex indexes a Messages body for FindIn: its messages down to
// each content block with a source or a uuid.
var MessagesIndex = messagesOf(bodykeys.Messages, &jsonbody.Index{Members: map[string]*jsonbody.Index{
	"source": {}, keyUUID: {},
}})

// list is the member of shape s's body holding its messages.
func (s Shape) list() string {
	if s == Responses {
		return "input"
	}
	return "messages"
}

// Part is one image part of a body.
type Part struct {
	// Part is the content part object; ImageURL its "image_url" object
	// (chat only; nil otherwise). Read them only: edit through
	// Locations.Edit or Locations.Replace.
	Part     *jsonbody.Object
	ImageURL *jsonbody.Object
	// URL is the image's URL: chat's image_url.url, a Responses part's
	// image_url, a Messages source's url, or its base64 source as a data
	// URI. It may alias the client's body.
	URL string
	// Message and Content locate the part: <list>[Message].content[Content].
	Message, Content int
	// Where names the member holding the URL, for errors:
	// " (in messages[0].content[1].image_url.url)".
	Where string
}

// Locations locates the image parts of a body, in document order: the
// k-th image part is at Locations[k].
type Locations []location

// location locates an image part: <list>[message].content[content].
type location struct {
	shape            Shape
	message, content int
}

// Find finds the image parts of root, a chat body indexed with Index (at
// least), in document order (FindIn with Chat).
func Find(root *jsonbody.Object) Locations { return FindIn(root, Chat) }

// FindIn finds the image parts of root, a body of shape s indexed with its
// index (Index, ResponsesIndex, MessagesIndex) at least, in document order.
// An image part is a content part vLLM reads as an image whose URL is a
// string (chat and Responses: see chatPart; a Messages block of type
// image whose source is url, or base64 with media_type and data); other
// parts are skipped, and a message whose content is not an array has
// none. Check refuses the media parts that are not images. Steps never add
// or remove parts, so the locations hold for the body as it stands and
// every leg of it.
func FindIn(root *jsonbody.Object, s Shape) Locations {
	var locs Locations
	_ = eachPart(root, s, func(mi, ci int, part *jsonbody.Object) error {
		if _, ok, _ := partOf(s, part); ok {
			locs = append(locs, location{s, mi, ci})
		}
		return nil
	})
	return locs
}

// Check refuses, naming it, the first content part of root (a body of
// shape s, indexed as for FindIn) that vLLM reads as media the pipeline
// cannot guard: audio, video, embeddings (see refusedKinds).
func Check(root *jsonbody.Object, s Shape) error {
	return eachPart(root, s, func(mi, ci int, part *jsonbody.Object) error {
		if _, _, err := partOf(s, part); err != nil {
			return fmt.Errorf("%s[%d].content[%d]: %w", s.list(), mi, ci, err)
		}
		return nil
	})
}

// DropUUIDs removes the client's "uuid" from every content part of root
// (a body of shape s, indexed as for FindIn) and returns how many it
// removed: the coordinator owns it (vLLM takes it as the media's cache
// key, and types a part that has one by its keys). A body without one is
// not edited.
func DropUUIDs(root *jsonbody.Object, s Shape) int {
	var at [][2]int
	_ = eachPart(root, s, func(mi, ci int, part *jsonbody.Object) error {
		if _, ok := part.Get(keyUUID); ok {
			at = append(at, [2]int{mi, ci})
		}
		return nil
	})
	for _, p := range at {
		location{s, p[0], p[1]}.edit(root).Delete(keyUUID)
	}
	return len(at)
}

// Any reports whether root (a body of shape s, indexed as for FindIn) has
// a content part vLLM may read as media: one of a media type, or with a
// media key whatever its type (a uuid makes vLLM type a part by its keys).
// It is the passthrough's test, which guards no media and so refuses it.
func Any(root *jsonbody.Object, s Shape) bool {
	errFound := errors.New("media")
	return eachPart(root, s, func(_, _ int, part *jsonbody.Object) error {
		if mediaKind(part) != "" || kindByKeys(part) != "" {
			return errFound
		}
		if _, ok, err := partOf(s, part); ok || err != nil {
			return errFound
		}
		return nil
	}) != nil
}

// eachPart calls fn for each content part root's index kept, in document
// order, with its place; it stops at fn's first error.
func eachPart(root *jsonbody.Object, s Shape, fn func(mi, ci int, part *jsonbody.Object) error) error {
	msgs := root.Array(s.list())
	if msgs == nil {
		return nil
	}
	for mi := range msgs.Indexed() {
		msg := msgs.Object(mi)
		if msg == nil || msg.Array("content") == nil {
			continue
		}
		content := msg.Array("content")
		for ci := range content.Indexed() {
			if part := content.Object(ci); part != nil {
				if err := fn(mi, ci, part); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// partOf reads part as an image part of shape s; err refuses a media
// part the pipeline cannot guard.
func partOf(s Shape, part *jsonbody.Object) (Part, bool, error) {
	if part == nil {
		return Part{}, false, nil
	}
	if s != Messages {
		return chatPart(part)
	}
	typ, _ := part.String("type")
	source := part.Object("source")
	if typ != "image" || source == nil {
		return Part{}, false, nil
	}
	url, ok := sourceURL(source)
	return Part{Part: part, URL: url}, ok, nil
}

// sourceURL is a Messages image source's URL: its url, or its base64 data
// as a data URI.
func sourceURL(source *jsonbody.Object) (string, bool) {
	kind, _ := source.String("type")
	switch kind {
	case "url":
		return source.String("url")
	case "base64":
		mediaType, ok := source.String("media_type")
		data, ok2 := source.String("data")
		if !ok || !ok2 {
			return "", false
		}
		return "data:" + mediaType + ";base64," + data, true
	}
	return "", false
}

// where names the member holding loc's URL.
func (loc location) where() string {
	switch loc.shape {
	case Responses:
		return fmt.Sprintf(" (in input[%d].content[%d].image_url)", loc.message, loc.content)
	case Messages:
		return fmt.Sprintf(" (in messages[%d].content[%d].source)", loc.message, loc.content)
	}
	return fmt.Sprintf(" (in messages[%d].content[%d].image_url.url)", loc.message, loc.content)
}

// Each calls fn for each image part of root (the body the locations were
// found in, or a leg of it), in document order, with k counting image parts
// from 0; it stops at fn's first error and returns it.
func (l Locations) Each(root *jsonbody.Object, fn func(k int, p Part) error) error {
	for k, loc := range l {
		p, _, _ := partOf(loc.shape, root.Array(loc.shape.list()).Object(loc.message).Array("content").Object(loc.content))
		p.Message, p.Content, p.Where = loc.message, loc.content, loc.where()
		if err := fn(k, p); err != nil {
			return err
		}
	}
	return nil
}

// editPart returns the k-th image part of root for editing, copied along
// the way from root so that nothing sharing it sees the edits.
func (l Locations) editPart(root *jsonbody.Object, k int) *jsonbody.Object { return l[k].edit(root) }

// edit returns the part at loc in root for editing (see editPart).
func (loc location) edit(root *jsonbody.Object) *jsonbody.Object {
	return root.EditArray(loc.shape.list()).EditObject(loc.message).EditArray("content").EditObject(loc.content)
}

// Edit returns the k-th image part of root (the body the locations were
// found in, or a leg of it) and its image_url object (nil when it has none:
// an image_url string, a Messages block) for editing, copied along the way
// from root so that nothing sharing them sees the edits. The part is
// rewritten whole, its image_url included, as the body is written.
func (l Locations) Edit(root *jsonbody.Object, k int) (part, imageURL *jsonbody.Object) {
	part = l.editPart(root, k)
	if imageURL = part.EditObject("image_url"); imageURL != nil {
		imageURL.Touch()
	}
	return part, imageURL
}

// Replace makes the k-th image part of root carry the image inline: its
// URL becomes dataURI (a JSON string "data:<type>;base64,<data>") in chat
// and Responses parts, in the image_url object or string the part has; a
// Messages block's source becomes
// {"type":"base64","media_type":mediaType,"data":data}.
func (l Locations) Replace(root *jsonbody.Object, k int, dataURI []byte, mediaType, data string) {
	switch l[k].shape {
	case Messages:
		src := append([]byte(`{"type":"base64","media_type":`), jsonbody.AppendString(nil, mediaType)...)
		src = append(src, `,"data":`...)
		src = jsonbody.AppendString(src, data)
		l.editPart(root, k).Set("source", append(src, '}'))
	default:
		part, imageURL := l.Edit(root, k)
		if imageURL == nil {
			part.Set("image_url", dataURI)
			return
		}
		imageURL.Set("url", dataURI)
	}
}
