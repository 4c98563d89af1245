package pd

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"
)

// lineReader reads the lines of an event stream. Its read buffer is held
// only while it has bytes in it: when everything read has been taken, the
// buffer goes back to a pool and the next read waits for the worker with
// a one-byte read of its own, so a stream waiting on its worker (most of
// a generation's time, and all of an idle stream's) holds no buffer. The
// connection below keeps what arrived (its own buffer) until the second
// read takes it.
type lineReader struct {
	r          io.Reader
	buf        *[]byte // from lineBuffers; nil while empty
	start, end int     // the unread bytes of *buf
	one        [1]byte
	long       []byte // a line longer than the buffer, joined
	empty      int    // reads in a row that returned nothing and no error
}

// lineBufferSize is the read buffer: a line longer than it is joined from
// several reads.
const lineBufferSize = 4 << 10

var lineBuffers = sync.Pool{New: func() any { b := make([]byte, lineBufferSize); return &b }}

func newLineReader(r io.Reader) lineReader { return lineReader{r: r} }

// readLine returns one line without its line ending (LF or CRLF); a last
// line without one is returned too, then io.EOF. The slice is valid until
// the next call.
func (l *lineReader) readLine() ([]byte, error) {
	l.long = l.long[:0]
	for {
		unread := l.unread()
		if i := bytes.IndexByte(unread, '\n'); i >= 0 {
			l.start += i + 1
			return l.line(unread[:i]), nil
		}
		if l.buf != nil && l.start == 0 && l.end == len(*l.buf) { // full, no line end: keep it, read on
			if len(l.long)+len(unread) > maxEventSize {
				return nil, fmt.Errorf("line longer than %d bytes", maxEventSize)
			}
			l.long = append(l.long, unread...)
			l.start, l.end = 0, 0
		}
		if err := l.fill(); err != nil {
			if errors.Is(err, io.EOF) && (len(l.long) > 0 || l.buffered() > 0) {
				line := l.line(l.unread())
				l.start = l.end
				return line, nil
			}
			return nil, err
		}
	}
}

// line is the line whose last part is tail (the rest in l.long), without
// its CR.
func (l *lineReader) line(tail []byte) []byte {
	line := tail
	if len(l.long) > 0 {
		l.long = append(l.long, tail...)
		line = l.long
	}
	return bytes.TrimSuffix(line, []byte("\r"))
}

// maxEmptyReads is how many reads in a row may return nothing and no
// error before the reader gives up (io.ErrNoProgress), as bufio's does.
const maxEmptyReads = 100

// fill reads more. With nothing unread it hands the buffer back and waits
// for the next byte alone, then takes a buffer for what came with it.
func (l *lineReader) fill() error {
	if l.buffered() == 0 {
		l.release()
		n, err := l.r.Read(l.one[:])
		if n == 0 {
			return l.nothing(err)
		}
		l.empty = 0
		l.buf = lineBuffers.Get().(*[]byte)
		(*l.buf)[0] = l.one[0]
		l.start, l.end = 0, 1
		if l.one[0] == '\n' {
			return nil // a line end: the caller has a line, and may not wait for more
		}
	}
	if l.start > 0 { // make room at the end
		l.end = copy(*l.buf, (*l.buf)[l.start:l.end])
		l.start = 0
	}
	n, err := l.r.Read((*l.buf)[l.end:])
	l.end += n
	if n > 0 {
		l.empty = 0
		return nil
	}
	return l.nothing(err)
}

// nothing is fill's outcome for a read that returned no byte and err.
func (l *lineReader) nothing(err error) error {
	if err != nil {
		return err
	}
	if l.empty++; l.empty >= maxEmptyReads {
		return io.ErrNoProgress
	}
	return nil
}

// buffered is the number of unread bytes.
func (l *lineReader) buffered() int { return l.end - l.start }

// unread is the unread bytes.
func (l *lineReader) unread() []byte {
	if l.buf == nil {
		return nil
	}
	return (*l.buf)[l.start:l.end]
}

// lineBuffered reports whether a complete line is unread, so reading it
// will not wait.
func (l *lineReader) lineBuffered() bool { return bytes.IndexByte(l.unread(), '\n') >= 0 }

// release hands the buffer back to the pool.
func (l *lineReader) release() {
	if l.buf != nil {
		lineBuffers.Put(l.buf)
		l.buf, l.start, l.end = nil, 0, 0
	}
}
