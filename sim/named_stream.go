package sim

import (
	"context"
	"encoding/json"
	"net/http"
)

// namedStream writes the typed server-sent events of an API whose every
// event names its type ("event: <type>" before its data): the OpenAI
// Responses stream (responses.go) and the Anthropic Messages stream
// (messages.go). One answer choice; each method appends whole events.
type namedStream interface {
	// open appends the events before the first token.
	open(b []byte) []byte
	// delta appends the event of token i.
	delta(b []byte, i int) []byte
	// close appends the events after the last token.
	close(b []byte) []byte
}

// writeNamedStream answers a Responses or Messages request with its own
// event stream, one delta event per token flushed as it is written, with
// the delays and faults of writeStream. There is no "[DONE]": the last
// event ends the stream. The stream stops when ctx ends.
func (g *generation) writeNamedStream(ctx context.Context, w http.ResponseWriter) {
	var ev namedStream = &messagesStream{g: g}
	if g.format == formatResponses {
		ev = &responsesStream{g: g}
	}
	rc := startStream(w)
	buf := ev.open(make([]byte, 0, 1024))
	if _, err := w.Write(buf); err != nil || rc.Flush() != nil {
		return
	}
	if !g.streamTokens(ctx, w, rc, ev.delta) {
		return
	}
	if _, err := w.Write(ev.close(buf[:0])); err != nil {
		return
	}
	_ = rc.Flush()
}

// appendNamedEvent appends one event: its type, then v as its JSON data.
func appendNamedEvent(b []byte, name string, v any) []byte {
	data, err := json.Marshal(v)
	if err != nil { // unreachable: the events are plain structs
		data = []byte(`{}`)
	}
	b = append(b, "event: "...)
	b = append(b, name...)
	b = append(b, "\ndata: "...)
	b = append(b, data...)
	return append(b, "\n\n"...)
}
