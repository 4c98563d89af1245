package jsonbody

import (
	"errors"
	"fmt"
)

// MaxIndexed bounds what one [ParseIndexedLimits] keeps as nested Objects
// and Arrays: their members and elements, together, and those read so far
// of the containers the parse is in. With sparse indexes (see
// [Index.Sparse]) no real request comes near it (a top-level object of a
// hundred keys, a few entries per image part); it keeps what a parse holds
// beside the document's own bytes within a few MiB (an entry is about a
// hundred bytes) whatever the body's shape. A document that would keep more
// fails with a [*LimitError].
const MaxIndexed = 1 << 13

// ErrLimit is what a [*LimitError] is (errors.Is).
var ErrLimit = errors.New("json body exceeds a limit")

// Limits bound what a document may hold, counted as [ParseIndexedLimits]
// validates it, before anything is kept. A zero field does not bound.
type Limits struct {
	// Nodes bounds the JSON values of the document: every object, array,
	// string, number and literal at any depth (keys are not values; the
	// elements of a token-ID array are). Its Name is not used.
	Nodes Count
	// Counts bound the elements of the arrays whose Index has a Count:
	// Counts[c-1] bounds the total of all arrays indexed with Count c,
	// across the document.
	Counts []Count
}

// Count names what Index.Count counts, for errors, and bounds it.
type Count struct {
	// Name is what is counted, plural ("content blocks").
	Name string
	// Max is the most the document may hold; 0 does not bound.
	Max int
	// Key names the setting of Max, for errors ("server.max_messages").
	Key string
}

// LimitError reports a document that holds more of something than a
// limit allows, at the offset of the first value past it.
type LimitError struct {
	// What is what was counted ("JSON values", "messages").
	What string
	// Max is the limit, Key the setting that holds it ("" for MaxIndexed).
	Max int
	Key string
	// Offset is where the first value past the limit starts.
	Offset int64
}

// Error says what and which limit: "json body has more than 4 messages
// (server.max_messages) at offset 61".
func (e *LimitError) Error() string {
	s := fmt.Sprintf("json body has more than %d %s", e.Max, e.What)
	if e.Key != "" {
		s += " (" + e.Key + ")"
	}
	return s + fmt.Sprintf(" at offset %d", e.Offset)
}

// Is makes a LimitError ErrLimit.
func (e *LimitError) Is(target error) bool { return target == ErrLimit }

// counter counts what a parse keeps and what its limits bound.
type counter struct {
	lim    *Limits
	nodes  int
	counts []int
	// kept is the number of members and elements kept so far.
	kept int
}

// node counts one value starting at data[i].
func (c *counter) node(i int) error {
	if c == nil {
		return nil
	}
	c.nodes++
	if c.lim != nil && c.lim.Nodes.Max > 0 && c.nodes > c.lim.Nodes.Max {
		return &LimitError{What: "JSON values", Max: c.lim.Nodes.Max, Key: c.lim.Nodes.Key, Offset: int64(i)}
	}
	return nil
}

// element counts one element, at data[i], of an array indexed with Count
// n (0: not counted).
func (c *counter) element(n, i int) error {
	if n == 0 || c.lim == nil || n > len(c.lim.Counts) {
		return nil
	}
	if c.counts == nil {
		c.counts = make([]int, len(c.lim.Counts))
	}
	c.counts[n-1]++
	if l := c.lim.Counts[n-1]; l.Max > 0 && c.counts[n-1] > l.Max {
		return &LimitError{What: l.Name, Max: l.Max, Key: l.Key, Offset: int64(i)}
	}
	return nil
}

// indexed checks that entries kept and pending (in the scratch) stay
// within MaxIndexed.
func (c *counter) indexed(pending, i int) error {
	if c.kept+pending > MaxIndexed {
		return &LimitError{What: "indexed members and elements", Max: MaxIndexed, Offset: int64(i)}
	}
	return nil
}
