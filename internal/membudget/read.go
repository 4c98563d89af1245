package membudget

import (
	"context"
	"errors"
	"fmt"
	"io"
)

// ErrTooLarge is wrapped by ReadAll's error when the reader has more than
// the bytes allowed.
var ErrTooLarge = errors.New("larger than allowed")

// Chunk sizes of ReadAll's list: a body of unknown length starts small, so
// that a request that sends little holds little; each next chunk doubles,
// up to the last, so that a large body takes few chunks.
const (
	smallChunk = 512
	firstChunk = 32 << 10
	lastChunk  = 4 << 20
)

// ReadAll reads r to its end into one slice of exactly the bytes read,
// drawing from ctx's account (FromContext) as the bytes arrive. declared
// is the length r announces (a Content-Length), 0 or -1 when unknown; it is
// trusted only as far as bytes back it, so a client or worker that
// announces much and sends little holds little:
//
//   - a declared length up to 32 KiB is read straight into a slice of that
//     size;
//   - a longer one is read into a list of chunks (32 KiB, doubling up to
//     4 MiB) until an eighth of it has arrived, then into one slice of the
//     declared size that the chunks are copied into and given back: the
//     read's peak is 1.125 times the body, and an announcement costs at most
//     eight times the bytes sent (and draws them from the budget first);
//   - an unknown length goes into chunks from 512 bytes up, then into one
//     exact slice: a peak of twice the body, every byte copied once.
//
// More than max bytes is an error wrapping ErrTooLarge, found as soon as
// byte max+1 arrives; so is a body longer than it declared. A refusal of
// the account wraps ErrExhausted. On an error, ReadAll gives back what it
// drew; on success the account keeps the returned slice's draw.
func ReadAll(ctx context.Context, r io.Reader, declared, max int64) ([]byte, error) {
	g := &reading{ctx: ctx, a: FromContext(ctx), max: max}
	out, err := g.read(r, declared)
	if err != nil {
		g.a.Give(g.drawn)
		return nil, err
	}
	return out, nil
}

// reading is one ReadAll: its chunks so far and what it drew.
type reading struct {
	ctx    context.Context
	a      *Account
	max    int64
	chunks [][]byte
	total  int64 // bytes in the chunks
	drawn  int64 // bytes drawn, for the chunks and the final slice
}

func (g *reading) read(r io.Reader, declared int64) ([]byte, error) {
	known := declared > 0 && declared <= g.max // 0 may be a Response built without it: read as unknown
	size := int64(smallChunk)
	if known {
		size = firstChunk
	}
	for {
		if known && (declared <= firstChunk || g.total >= declared/8) {
			return g.into(r, declared)
		}
		if g.total > g.max {
			return nil, fmt.Errorf("%w: more than %d bytes", ErrTooLarge, g.max)
		}
		n := min(size, g.max-g.total+1) // a last chunk holds no more than one byte past max
		if known {
			n = min(n, declared/8-g.total) // the chunks stop at an eighth of the declared length
		}
		if err := g.take(n); err != nil {
			return nil, err
		}
		c := make([]byte, n)
		m, err := fill(r, c)
		g.total += int64(m)
		g.chunks = append(g.chunks, c[:m])
		if err == io.EOF {
			if g.total > g.max {
				return nil, fmt.Errorf("%w: more than %d bytes", ErrTooLarge, g.max)
			}
			return g.join(g.total)
		}
		if err != nil {
			return nil, err
		}
		size = min(2*size, lastChunk)
	}
}

// take draws n bytes from the account.
func (g *reading) take(n int64) error {
	if err := g.a.Take(g.ctx, n); err != nil {
		return err
	}
	g.drawn += n
	return nil
}

// into reads the rest of a body of declared bytes into one slice of that
// size, after the chunks read so far; a body that ends short of it is
// io.ErrUnexpectedEOF, one that goes on past it ErrTooLarge.
func (g *reading) into(r io.Reader, declared int64) ([]byte, error) {
	if g.total > declared {
		return nil, fmt.Errorf("%w: more than its declared %d bytes", ErrTooLarge, declared)
	}
	out, err := g.join(declared)
	if err != nil {
		return nil, err
	}
	m, err := fill(r, out[len(out):declared])
	out = out[:len(out)+m]
	switch {
	case err == io.EOF && int64(len(out)) < declared:
		return nil, io.ErrUnexpectedEOF
	case err != nil && err != io.EOF:
		return nil, err
	}
	var one [1]byte
	if n, err := fill(r, one[:]); n > 0 {
		return nil, fmt.Errorf("%w: more than its declared %d bytes", ErrTooLarge, declared)
	} else if err != io.EOF {
		return nil, err
	}
	return out, nil
}

// join is the chunks' bytes at the start of one slice of capacity size:
// the only chunk when it fits exactly, else a copy, drawn for, after which
// the chunks' draw goes back.
func (g *reading) join(size int64) ([]byte, error) {
	if len(g.chunks) == 1 && int64(cap(g.chunks[0])) == size {
		return g.chunks[0], nil
	}
	chunksDrawn := g.drawn
	if err := g.take(size); err != nil {
		return nil, err
	}
	out := make([]byte, 0, size)
	for i, c := range g.chunks {
		out = append(out, c...)
		g.chunks[i] = nil
	}
	g.chunks = nil
	g.a.Give(chunksDrawn)
	g.drawn -= chunksDrawn
	return out, nil
}

// fill reads into c until it is full or r ends (io.EOF) or fails. Unlike
// io.ReadFull, a reader's own io.ErrUnexpectedEOF (a body cut short of its
// Content-Length) stays an error.
func fill(r io.Reader, c []byte) (int, error) {
	n := 0
	for n < len(c) {
		m, err := r.Read(c[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}
