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

// Chunk sizes of ReadAll: the first is small, so that a request that sends
// little (whatever length it declares) holds little; each next one doubles,
// up to the last, so that a large body takes few chunks.
const (
	firstChunk = 32 << 10
	lastChunk  = 4 << 20
)

// ReadAll reads r to its end into one slice of exactly the bytes read,
// drawing from ctx's account (FromContext) as the bytes arrive: never a
// declared length up front, so a client or worker that announces much and
// sends little holds little. The bytes go into a list of chunks (32 KiB
// first, doubling up to 4 MiB), then, when more than one was needed, into
// one slice of the exact size, drawn for the moment of the copy and the
// chunks given back after: what the read holds at the end is what it
// returns, its peak twice that, and every byte is copied at most once.
//
// More than max bytes is an error wrapping ErrTooLarge, found as soon as
// byte max+1 arrives; so is a refusal of the account (ErrExhausted). On
// an error, ReadAll gives back what it drew.
func ReadAll(ctx context.Context, r io.Reader, max int64) ([]byte, error) {
	a := FromContext(ctx)
	var (
		chunks [][]byte
		total  int64 // bytes read
		drawn  int64 // bytes drawn for the chunks
		size   = int64(firstChunk)
	)
	fail := func(err error) ([]byte, error) {
		a.Give(drawn)
		return nil, err
	}
	for {
		if total > max {
			return fail(fmt.Errorf("%w: more than %d bytes", ErrTooLarge, max))
		}
		n := size
		if rest := max - total; rest < n {
			n = rest + 1 // a last chunk holds no more than one byte past max
		}
		if err := a.Take(ctx, n); err != nil {
			return fail(err)
		}
		drawn += n
		c := make([]byte, n)
		m, err := fill(r, c)
		total += int64(m)
		chunks = append(chunks, c[:m])
		if err == io.EOF {
			break
		}
		if err != nil {
			return fail(err)
		}
		size = min(2*size, lastChunk)
	}
	if total > max {
		return fail(fmt.Errorf("%w: more than %d bytes", ErrTooLarge, max))
	}
	return join(ctx, a, chunks, total, drawn)
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

// join is the chunks' bytes in one slice: the only chunk trimmed to its
// bytes when there is one (giving back its unused capacity's draw is not
// possible, the slice keeps it; it is at most one chunk), else a copy into
// an exact slice, after which the chunks' draw goes back.
func join(ctx context.Context, a *Account, chunks [][]byte, total, drawn int64) ([]byte, error) {
	if len(chunks) == 1 {
		return chunks[0], nil
	}
	if err := a.Take(ctx, total); err != nil {
		a.Give(drawn)
		return nil, err
	}
	out := make([]byte, 0, total)
	for i, c := range chunks {
		out = append(out, c...)
		chunks[i] = nil
	}
	a.Give(drawn)
	return out, nil
}
