package requestbody

import (
	"github.com/coordinator-project/coordinator/internal/jsonbody"
	"github.com/coordinator-project/coordinator/internal/wire/bodykeys"
	"github.com/coordinator-project/coordinator/internal/wire/features"
	"github.com/coordinator-project/coordinator/internal/wire/imageparts"
	"github.com/coordinator-project/coordinator/internal/wire/legs"
)

// Document is the client's JSON body validated and indexed once, with the
// edits steps made to it since. The one pass that validates the body also
// indexes what the steps read (by format: of the chat, Responses and
// Messages messages, only the content parts that may be media or carry a
// uuid, so that a body of many small parts keeps no object for each; the
// completions prompt and the generate token_ids as token-ID arrays,
// counted and checked; the generate features and sampling_params), so no
// step scans the body again.
//
// Steps read the document as it stands with Root, and the step that owns a
// member edits it there (replace-media-urls an image's url, render a
// rendered prompt). A leg's edits go on a Leg, a copy that shares every
// value it does not change with the document; Write then gives the leg's
// body in one pass, the parts nobody changed (images, long strings, token
// arrays) by reference to the client's bytes. A document nobody edited is
// written as the client's exact bytes.
//
// The client's bytes must not be modified while the document is in use.
// A Document is not safe for concurrent use when any goroutine edits it;
// legs written concurrently from it (encode's fan-out) only read it.
type Document struct {
	raw    []byte
	root   *jsonbody.Object
	format legs.Format
	// images locates the chat image parts, found on first use.
	images     imageparts.Locations
	imagesDone bool
	// stream is "stream" as decided on first use (Stream).
	stream     bool
	streamErr  error
	streamRead bool
}

// Indexes of the formats' bodies: what the steps read or edit.
var (
	chatIndex        = imageparts.Index // the messages down to the content parts that may be media
	completionsIndex = &jsonbody.Index{Members: map[string]*jsonbody.Index{
		bodykeys.Prompt: {Uint32s: true},
	}}
	generateIndex = &jsonbody.Index{Members: map[string]*jsonbody.Index{
		bodykeys.TokenIDs:       {Uint32s: true},
		bodykeys.Features:       features.Index,
		bodykeys.SamplingParams: {Members: map[string]*jsonbody.Index{bodykeys.ExtraArgs: {}}},
	}}
)

// indexOf is the index of format f's bodies.
func indexOf(f legs.Format) *jsonbody.Index {
	switch f {
	case legs.FormatChat:
		return chatIndex
	case legs.FormatCompletions:
		return completionsIndex
	case legs.FormatGenerate:
		return generateIndex
	case legs.FormatResponses:
		return imageparts.ResponsesIndex
	case legs.FormatMessages:
		return imageparts.MessagesIndex
	}
	return nil
}

// ParseDocument is ParseDocumentLimits with the default limits.
func Parse(body []byte, f legs.Format) (*Document, error) {
	return ParseLimited(body, f, Limits{})
}

// ParseDocumentLimits validates body, a JSON object, and indexes it for
// format f, within lim: it counts the body's values, messages and content
// blocks as it validates them, and fails at the first past a limit before
// keeping anything of it. What it keeps beside the body's own bytes is
// bounded (jsonbody.MaxIndexed) whatever the body's shape. Errors are
// jsonbody's: a *jsonbody.SyntaxError, an error wrapping
// jsonbody.ErrTooDeep, a *jsonbody.LimitError, or jsonbody.ErrNotObject.
func ParseLimited(body []byte, f legs.Format, lim Limits) (*Document, error) {
	root, err := jsonbody.ParseIndexedLimits(body, indexOf(f), lim.jsonbody())
	if err != nil {
		return nil, err
	}
	return &Document{raw: body, root: root, format: f}, nil
}

// Check checks what the coordinator relies on in a Responses or Messages
// body, and refuses what a stateless coordinator cannot serve (package
// apibody), and in a chat, Responses or Messages body the content parts
// vLLM reads as media the pipeline cannot guard (imageparts.Check). The
// error is the client's fault.
func (d *Document) Check() error { return d.check(false) }

// CheckStored is Check for a coordinator that stores responses: a
// Responses body's "store" and "previous_response_id" are its response
// store's to read, not refused.
func (d *Document) CheckStored() error { return d.check(true) }

func (d *Document) check(stored bool) error {
	if err := checkFormat(d.root, d.format, stored); err != nil {
		return err
	}
	if s, ok := shapeOf(d.format); ok {
		if err := imageparts.Check(d.root, s); err != nil {
			return legs.Invalidf("%v", err)
		}
	}
	return nil
}

// DropMediaUUIDs removes the client's "uuid" from every content part and
// returns how many it removed (imageparts.DropUUIDs): the coordinator owns
// it, as the key vLLM caches media under. The coordinator's own uuids are
// written on the legs later (decode).
func (d *Document) DropMediaUUIDs() int {
	s, ok := shapeOf(d.format)
	if !ok {
		return 0
	}
	return imageparts.DropUUIDs(d.root, s)
}

// Stream is the body's "stream" as a worker's pydantic reads it
// (legs.Flag: "true", 1 or "yes" stream too), or a client error naming it:
// decided once, on first use, and kept. The REST front picks Generate or
// GenerateStream by it, and the service, handed the front's document,
// frames the answer by the same decision.
func (d *Document) Stream() (bool, error) {
	if !d.streamRead {
		d.stream, d.streamErr = legs.Flag(d.root, bodykeys.Stream)
		d.streamRead = true
	}
	return d.stream, d.streamErr
}

// SpellStream writes "stream" as decided, a literal true or false where the
// client spelled it otherwise, so a strict (Go) worker reads what vLLM
// would (legs.SpellFlag).
func (d *Document) SpellStream(stream bool) { legs.SpellFlag(d.root, bodykeys.Stream, stream) }

// Unstored makes a Responses body say "store": false unless the client
// sent that literal (Unstored, openai_responses.go): the coordinator stores nothing, and
// vLLM's default is true. Other formats are left alone.
func (d *Document) Unstored() { Unstored(d.root, d.format) }

// HasMedia reports whether the body has a content part vLLM may read as
// media (imageparts.Any), by its format's shape; false for a format
// without content parts.
func (d *Document) HasMedia() bool {
	s, ok := shapeOf(d.format)
	return ok && imageparts.Any(d.root, s)
}

// shapeOf is where format f's bodies keep their media.
func shapeOf(f legs.Format) (imageparts.Shape, bool) {
	switch f {
	case legs.FormatChat:
		return imageparts.Chat, true
	case legs.FormatResponses:
		return imageparts.Responses, true
	case legs.FormatMessages:
		return imageparts.Messages, true
	}
	return 0, false
}

// Of reports whether the document was parsed from exactly these bytes (the
// same memory, not an equal copy).
func (d *Document) Of(body []byte) bool {
	return len(body) == len(d.raw) && (len(body) == 0 || &body[0] == &d.raw[0])
}

// Format is the format the document was indexed for.
func (d *Document) Format() legs.Format { return d.format }

// Root is the document as it stands. Steps read it; only the step that
// owns a member edits it here, for every later step and leg to see.
func (d *Document) Root() *jsonbody.Object { return d.root }

// Leg returns a copy of the document for one leg's edits (see
// jsonbody.Object.Clone): the document does not see them.
func (d *Document) Leg() *jsonbody.Object { return d.root.Clone() }

// Write returns the body of o, the document's root or a leg of it, as
// consecutive parts: the client's exact bytes when nothing was edited,
// else o written in one pass with what nobody changed by reference.
func (d *Document) Write(o *jsonbody.Object) [][]byte {
	if !o.Edited() {
		return [][]byte{d.raw}
	}
	var s jsonbody.Segments
	o.AppendSegments(&s)
	return s.Parts()
}

// ImageParts locates the image parts of a chat, Responses or Messages
// document, in document order, found on first use; another format has
// none.
func (d *Document) ImageParts() imageparts.Locations {
	if !d.imagesDone {
		d.imagesDone = true
		if s, ok := shapeOf(d.format); ok {
			d.images = imageparts.FindIn(d.root, s)
		}
	}
	return d.images
}

// Bytes is the document as it stands in one slice: the client's bytes when
// nothing was edited, else a new slice.
func (d *Document) Bytes() []byte {
	if !d.root.Edited() {
		return d.raw
	}
	var s jsonbody.Segments
	d.root.AppendSegments(&s)
	return s.Bytes()
}
