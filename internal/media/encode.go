package media

import (
	"context"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"unsafe"
)

// Framing is what a caller wants around an image's base64, in the one
// buffer Download fills: Before(mediaType), the base64, then After. The
// base64 is written there as the body arrives and never copied.
type Framing struct {
	// Before is the text before the base64, given the image's media type;
	// nil for none.
	Before func(mediaType string) string
	// After is the text after the base64.
	After string
}

// Image is a downloaded image, base64-encoded (standard alphabet, padded)
// inside the caller's framing.
type Image struct {
	// MediaType is the body's normalised type (e.g. "image/png").
	MediaType string
	// Framed is Framing.Before, the base64 of the body, Framing.After.
	Framed []byte
	// Base64 is the base64 of the body, sharing Framed's bytes, which are
	// never modified once the image is returned.
	Base64 string
	// Size is the body's length in bytes.
	Size int64
}

// chunkSize is how much of a body is read at a time: a multiple of 3, so
// that each whole chunk encodes to base64 on its own, without padding.
const chunkSize = 48 << 10

// errLongerThanDeclared is a body running past its Content-Length, which
// net/http does not let happen.
var errLongerThanDeclared = errors.New("body longer than its content length")

// body is a download's body being read into its image. Memory drawn from
// q for it is counted in held, so that a failed download gives it back.
type body struct {
	r         io.Reader // the body, limited to maxSize+1 bytes
	maxSize   int64
	q         *Quota
	held      int64
	mediaType string
}

// read reads resp's body, at most maxSize bytes, into an Image framed by
// f: straight into its one buffer when the Content-Length is known, else
// chunk by chunk, encoded once the body has ended. mediaType is the
// header's type, or "" to sniff it from the body. The bytes are counted
// against q's cap as they arrive (the whole Content-Length at once) and
// the memory they take drawn from q's account; a failure gives the
// memory back, a success keeps the image's (the account's owner gives it
// back when the request ends).
func read(ctx context.Context, resp *http.Response, mediaType string, maxSize int64, q *Quota, f Framing) (Image, error) {
	b := &body{r: io.LimitReader(resp.Body, maxSize+1), maxSize: maxSize, q: q, mediaType: mediaType}
	img, err := b.read(ctx, resp.ContentLength, f)
	if err != nil {
		q.give(b.held)
	}
	return img, err
}

func (b *body) read(ctx context.Context, size int64, f Framing) (Image, error) {
	if size == 0 {
		return Image{}, newError(ErrEmpty, "empty body")
	}
	if size > 0 {
		if err := b.q.count(size); err != nil {
			return Image{}, err
		}
	}
	first := make([]byte, chunkSize)
	n, eof, err := fill(b.r, first)
	switch {
	case err != nil:
		return Image{}, err
	case n == 0:
		return Image{}, newError(ErrEmpty, "empty body")
	case int64(n) > b.maxSize:
		return Image{}, newError(ErrTooLarge, "body exceeds %d bytes", b.maxSize)
	}
	if b.mediaType == "" {
		b.mediaType, _ = headerType(http.DetectContentType(first[:n]))
		if !ImageType(b.mediaType) {
			return Image{}, newError(ErrNotImage, "content sniffed as %q is not an allowed image type", b.mediaType)
		}
	}
	if size > 0 {
		return b.stream(ctx, first[:n], eof, size, f)
	}
	return b.gather(ctx, first[:n], eof, f)
}

// stream encodes a body of a known size, whose first chunk has been read,
// straight into the image's buffer.
func (b *body) stream(ctx context.Context, chunk []byte, eof bool, size int64, f Framing) (Image, error) {
	img, err := b.frame(ctx, size, f)
	if err != nil {
		return Image{}, err
	}
	at := len(img.Framed) - len(f.After) - len(img.Base64)
	buf := chunk[:cap(chunk)]
	var done int64
	for {
		if done+int64(len(chunk)) > size {
			return Image{}, errLongerThanDeclared
		}
		base64.StdEncoding.Encode(img.Framed[at+base64.StdEncoding.EncodedLen(int(done)):], chunk)
		done += int64(len(chunk))
		if eof {
			break
		}
		n, end, err := fill(b.r, buf)
		if err != nil {
			return Image{}, err
		}
		chunk, eof = buf[:n], end
	}
	if done != size {
		return Image{}, io.ErrUnexpectedEOF
	}
	return img, nil
}

// gather reads a body of unknown size chunk by chunk, each counted and
// drawn as it arrives, then encodes the chunks into the image's buffer,
// dropping each once encoded.
func (b *body) gather(ctx context.Context, first []byte, eof bool, f Framing) (Image, error) {
	chunks := [][]byte{first}
	size := int64(len(first))
	if err := b.arrived(ctx, len(first)); err != nil {
		return Image{}, err
	}
	for !eof {
		c := make([]byte, chunkSize)
		n, end, err := fill(b.r, c)
		if err != nil {
			return Image{}, err
		}
		size += int64(n)
		if size > b.maxSize {
			return Image{}, newError(ErrTooLarge, "body exceeds %d bytes", b.maxSize)
		}
		if err := b.arrived(ctx, n); err != nil {
			return Image{}, err
		}
		chunks, eof = append(chunks, c[:n]), end
	}
	img, err := b.frame(ctx, size, f)
	if err != nil {
		return Image{}, err
	}
	at := len(img.Framed) - len(f.After) - len(img.Base64)
	for i, c := range chunks {
		base64.StdEncoding.Encode(img.Framed[at:], c)
		at += base64.StdEncoding.EncodedLen(len(c))
		chunks[i] = nil
		b.q.give(chunkSize)
		b.held -= chunkSize
	}
	return img, nil
}

// arrived counts n bytes just read against the request's cap and draws a
// chunk's memory for them.
func (b *body) arrived(ctx context.Context, n int) error {
	if err := b.q.count(int64(n)); err != nil {
		return err
	}
	if err := b.q.take(ctx, chunkSize); err != nil {
		return err
	}
	b.held += chunkSize
	return nil
}

// frame draws the memory of, and allocates, the image of a body of size
// bytes: its buffer with the framing in place and room for the base64.
func (b *body) frame(ctx context.Context, size int64, f Framing) (Image, error) {
	if size > b.maxSize {
		return Image{}, newError(ErrTooLarge, "body exceeds %d bytes", b.maxSize)
	}
	var before string
	if f.Before != nil {
		before = f.Before(b.mediaType)
	}
	n := base64.StdEncoding.EncodedLen(int(size))
	total := len(before) + n + len(f.After)
	if err := b.q.take(ctx, int64(total)); err != nil {
		return Image{}, err
	}
	b.held += int64(total)
	buf := make([]byte, total)
	copy(buf, before)
	copy(buf[len(before)+n:], f.After)
	return Image{
		MediaType: b.mediaType,
		Framed:    buf,
		Base64:    unsafe.String(&buf[len(before)], n),
		Size:      size,
	}, nil
}

// fill reads r into buf until buf is full or r ends; eof reports the end
// (io.EOF, which is not an error here).
func fill(r io.Reader, buf []byte) (n int, eof bool, err error) {
	for n < len(buf) {
		m, err := r.Read(buf[n:])
		n += m
		switch {
		case err == io.EOF:
			return n, true, nil
		case err != nil:
			return n, false, err
		}
	}
	return n, false, nil
}
