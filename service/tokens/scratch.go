package tokens

import coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"

// scratch is the storage a stream reuses from one event and one message to
// the next, so that a stream in its steady state allocates nothing per
// event: the worker's event as fastAnswer decodes it, and the logprob
// entries mergeChoice adds to the message being built. A decoded answer
// lasts until the next read; the message's entries until release, once
// the message is sent. A scratch is not safe for concurrent use.
type scratch struct {
	answer generateAnswer
	// The decoded answer's slices are windows of these, in the order
	// fastAnswer reads them.
	choices  []generateChoice
	tokenIDs []uint32
	logprobs []chatLogprobs
	content  []chatLogprob
	tops     []topLogprob
	spans    []weightSpan
	// What mergeChoice hands out for the message's logprobs.
	entries    block[coordinatorv1.TokenLogprob]
	topEntries block[coordinatorv1.TopLogprob]
	topPtrs    block[*coordinatorv1.TopLogprob]
}

// newAnswer is an empty answer to decode into: what the previous read
// returned is overwritten.
func (sc *scratch) newAnswer() *generateAnswer {
	sc.answer = generateAnswer{}
	sc.choices, sc.tokenIDs, sc.logprobs = sc.choices[:0], sc.tokenIDs[:0], sc.logprobs[:0]
	sc.content, sc.tops, sc.spans = sc.content[:0], sc.tops[:0], sc.spans[:0]
	return &sc.answer
}

// release takes back the logprob entries handed out: the message that
// held them is sent.
func (sc *scratch) release() {
	sc.entries.release()
	sc.topEntries.release()
	sc.topPtrs.release()
}

// block hands out runs of reused elements, with their old values.
type block[T any] struct {
	items []T
}

// take hands out n elements. When the block is full it starts a larger
// one rather than moving the elements already handed out: pointers to
// them stay valid.
func (b *block[T]) take(n int) []T {
	if cap(b.items)-len(b.items) < n {
		b.items = make([]T, 0, max(2*cap(b.items), n, 8))
	}
	out := b.items[len(b.items) : len(b.items)+n : len(b.items)+n]
	b.items = b.items[:len(b.items)+n]
	return out
}

func (b *block[T]) release() { b.items = b.items[:0] }
