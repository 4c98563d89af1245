package jsonbody

// Segments is a JSON text written as a list of byte slices to be sent one
// after the other: the small pieces a writer produces are copied into a
// buffer of its own, long ones are kept by reference. Writing a body of a
// few edits around megabytes of unchanged text thus copies only the edits.
// The zero value is empty and ready to use.
type Segments struct {
	parts []segment
	buf   []byte
	n     int
}

// segment is a referenced slice, or, when ref is nil, buf[off:off+n].
type segment struct {
	ref    []byte
	off, n int
}

// refMin is the shortest slice Ref keeps by reference; shorter ones are
// cheaper to copy than to send as a part of their own.
const refMin = 1024

// Write copies p.
func (s *Segments) Write(p []byte) {
	s.grow(len(p))
	s.buf = append(s.buf, p...)
}

// WriteString copies p.
func (s *Segments) WriteString(p string) {
	s.grow(len(p))
	s.buf = append(s.buf, p...)
}

// writeByte copies c.
func (s *Segments) writeByte(c byte) {
	s.grow(1)
	s.buf = append(s.buf, c)
}

// grow extends the open buffer part by n bytes.
func (s *Segments) grow(n int) {
	s.n += n
	if k := len(s.parts); k > 0 && s.parts[k-1].ref == nil {
		s.parts[k-1].n += n
		return
	}
	s.parts = append(s.parts, segment{off: len(s.buf), n: n})
}

// Ref appends p, by reference when it is long: p must then not change
// until the segments are sent.
func (s *Segments) Ref(p []byte) {
	if len(p) < refMin {
		s.Write(p)
		return
	}
	s.n += len(p)
	s.parts = append(s.parts, segment{ref: p})
}

// Len is the length of the text.
func (s *Segments) Len() int { return s.n }

// Parts returns the text as consecutive slices (none when empty). They
// alias the segments' buffer and the referenced slices.
func (s *Segments) Parts() [][]byte {
	out := make([][]byte, 0, len(s.parts))
	for _, p := range s.parts {
		switch {
		case p.ref != nil:
			out = append(out, p.ref)
		case p.n > 0:
			out = append(out, s.buf[p.off:p.off+p.n:p.off+p.n])
		}
	}
	return out
}

// Bytes returns the text in one new slice.
func (s *Segments) Bytes() []byte {
	out := make([]byte, 0, s.n)
	for _, p := range s.Parts() {
		out = append(out, p...)
	}
	return out
}

// AppendSegments writes the object: the text it was parsed from when it
// was not edited, else its members as [Object.AppendTo] writes them, each
// nested value written the same way, and long unchanged values by
// reference (see [Segments.Ref]).
func (o *Object) AppendSegments(s *Segments) {
	if !o.rewritten() {
		s.Ref(o.raw)
		return
	}
	s.writeByte('{')
	for i := range o.members {
		m := &o.members[i]
		if i > 0 {
			s.writeByte(',')
		}
		s.Write(m.key)
		s.writeByte(':')
		s.appendValue(m.value, m.obj, m.arr)
	}
	s.writeByte('}')
}

// AppendSegments writes the array as [Object.AppendSegments] writes an
// object.
func (a *Array) AppendSegments(s *Segments) {
	if !a.edited {
		s.Ref(a.raw)
		return
	}
	s.writeByte('[')
	a.each(func(i int, text []byte, e *element) {
		if i > 0 {
			s.writeByte(',')
		}
		if e == nil {
			s.Ref(text)
			return
		}
		s.appendValue(e.value, e.obj, e.arr)
	})
	s.writeByte(']')
}

// appendValue writes a member's or an element's value: its indexed object
// or array (obj, arr; at most one is set) as they write themselves, else
// its text by reference.
func (s *Segments) appendValue(value []byte, obj *Object, arr *Array) {
	switch {
	case obj != nil:
		obj.AppendSegments(s)
	case arr != nil:
		arr.AppendSegments(s)
	default:
		s.Ref(value)
	}
}
