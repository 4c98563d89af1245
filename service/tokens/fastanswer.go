package tokens

import (
	"bytes"
	"strconv"
)

// This file reads the usual shape of a worker's answer or stream event
// without encoding/json, which spends most of a rollout stream's CPU in
// the coordinator (reflection, and a validating pass before the decoding
// one). fastAnswer takes only what it reads exactly as encoding/json
// would: plain keys of the exact case, no escape in any string, no
// duplicate member it reads, numbers that fit their fields, no null where
// encoding/json would call a decoder with it. Anything else, valid or
// not, makes it give up (false) and readAnswer decodes the answer with
// encoding/json as before. FuzzFastAnswer holds that whatever it takes,
// it reads as encoding/json does.

// fastScan is a position in an answer's bytes.
type fastScan struct {
	data []byte
	i    int
}

// maxFastDepth bounds the nesting of the members fastAnswer skips.
const maxFastDepth = 64

// fastAnswer decodes data into a, or reports false, having maybe written
// part of a.
func fastAnswer(data []byte, a *generateAnswer) bool {
	s := fastScan{data: data}
	s.space()
	var seen uint8
	ok := s.object(func(key []byte) bool {
		switch string(key) {
		case "choices":
			return once(&seen, 1) && s.choices(&a.Choices)
		case "usage":
			return once(&seen, 2) && s.usage(&a.Usage)
		case "prompt_logprobs":
			return once(&seen, 4) && s.raw((*[]byte)(&a.PromptLogprobs))
		case "error":
			return once(&seen, 8) && s.raw((*[]byte)(&a.Error))
		case "code":
			return once(&seen, 16) && s.raw((*[]byte)(&a.Code))
		case "object":
			return once(&seen, 32) && s.stringValue(func(raw []byte) bool { return a.Object.UnmarshalJSON(raw) == nil })
		}
		return s.unknown(key, "choices", "usage", "prompt_logprobs", "error", "code", "object")
	})
	if !ok {
		return false
	}
	s.space()
	return s.i == len(s.data)
}

// once marks bit in seen and reports whether it was clear: a member read
// twice is left to encoding/json.
func once(seen *uint8, bit uint8) bool {
	if *seen&bit != 0 {
		return false
	}
	*seen |= bit
	return true
}

func (s *fastScan) choices(dst *[]generateChoice) bool {
	if s.null() {
		return true // a nil slice stays nil
	}
	out := make([]generateChoice, 0, 1)
	ok := s.array(func() bool {
		out = append(out, generateChoice{})
		return s.choice(&out[len(out)-1])
	})
	*dst = out
	return ok
}

func (s *fastScan) choice(c *generateChoice) bool {
	var seen uint8
	return s.object(func(key []byte) bool {
		switch string(key) {
		case "index":
			return once(&seen, 1) && s.uint32(&c.Index)
		case "token_ids":
			return once(&seen, 2) && s.uint32s(&c.TokenIDs)
		case "finish_reason": // UnmarshalJSON("null") leaves it unspecified
			return s.nullOr(&seen, 4, func() bool {
				return s.stringValue(func(raw []byte) bool { return c.FinishReason.UnmarshalJSON(raw) == nil })
			})
		case "logprobs":
			return s.nullOr(&seen, 8, func() bool {
				c.Logprobs = &chatLogprobs{}
				return s.logprobs(c.Logprobs)
			})
		}
		return s.unknown(key, "index", "token_ids", "finish_reason", "logprobs")
	})
}

func (s *fastScan) logprobs(l *chatLogprobs) bool {
	var seen uint8
	return s.object(func(key []byte) bool {
		if string(key) != "content" {
			return s.unknown(key, "content")
		}
		return s.nullOr(&seen, 1, func() bool {
			l.Content = make([]chatLogprob, 0, 1)
			return s.array(func() bool {
				l.Content = append(l.Content, chatLogprob{})
				return s.logprob(&l.Content[len(l.Content)-1])
			})
		})
	})
}

func (s *fastScan) logprob(e *chatLogprob) bool {
	var seen uint8
	return s.object(func(key []byte) bool {
		switch string(key) {
		case "token":
			return once(&seen, 1) && s.token(&e.Token)
		case "logprob":
			return once(&seen, 2) && s.float32(&e.Logprob)
		case "top_logprobs":
			return s.nullOr(&seen, 4, func() bool {
				e.TopLogprobs = make([]topLogprob, 0, 8)
				return s.array(func() bool {
					e.TopLogprobs = append(e.TopLogprobs, topLogprob{})
					return s.topLogprob(&e.TopLogprobs[len(e.TopLogprobs)-1])
				})
			})
		}
		return s.unknown(key, "token", "logprob", "top_logprobs")
	})
}

func (s *fastScan) topLogprob(t *topLogprob) bool {
	var seen uint8
	return s.object(func(key []byte) bool {
		switch string(key) {
		case "token":
			return once(&seen, 1) && s.token(&t.Token)
		case "logprob":
			return once(&seen, 2) && s.float32(&t.Logprob)
		}
		return s.unknown(key, "token", "logprob")
	})
}

func (s *fastScan) usage(dst **generateUsage) bool {
	if s.null() {
		return true
	}
	u := &generateUsage{}
	*dst = u
	var seen uint8
	return s.object(func(key []byte) bool {
		switch string(key) {
		case "prompt_tokens":
			return once(&seen, 1) && s.uint32(&u.PromptTokens)
		case "completion_tokens":
			return once(&seen, 2) && s.uint32(&u.CompletionTokens)
		case "total_tokens":
			return once(&seen, 4) && s.uint32(&u.TotalTokens)
		case "prompt_tokens_details":
			return s.nullOr(&seen, 8, func() bool {
				u.PromptTokensDetails = &struct {
					CachedTokens *uint32 `json:"cached_tokens"`
				}{}
				var seenDetails uint8
				return s.object(func(key []byte) bool {
					if string(key) != "cached_tokens" {
						return s.unknown(key, "cached_tokens")
					}
					return s.nullOr(&seenDetails, 1, func() bool {
						u.PromptTokensDetails.CachedTokens = new(uint32)
						return s.uint32(u.PromptTokensDetails.CachedTokens)
					})
				})
			})
		}
		return s.unknown(key, "prompt_tokens", "completion_tokens", "total_tokens", "prompt_tokens_details")
	})
}

// nullOr reads a member once (once): a null leaves the field as it is,
// as encoding/json leaves a nil pointer or slice; read reads anything
// else.
func (s *fastScan) nullOr(seen *uint8, bit uint8, read func() bool) bool {
	if !once(seen, bit) {
		return false
	}
	return s.null() || read()
}

// unknown skips the value of a member nobody reads, unless its key could
// name a field as encoding/json matches keys (any case, Unicode folding):
// a key with a byte past ASCII, or one of known in another case.
func (s *fastScan) unknown(key []byte, known ...string) bool {
	for _, c := range key {
		if c >= 0x80 {
			return false
		}
	}
	for _, k := range known {
		if bytes.EqualFold(key, []byte(k)) {
			return false
		}
	}
	return s.skip(0)
}

// object reads an object, calling member with each key (unescaped: a key
// with an escape gives up) positioned at its value, which member reads.
func (s *fastScan) object(member func(key []byte) bool) bool {
	if !s.byte('{') {
		return false
	}
	s.space()
	if s.byte('}') {
		return true
	}
	for {
		key, ok := s.plainString()
		if !ok {
			return false
		}
		s.space()
		if !s.byte(':') {
			return false
		}
		s.space()
		if !member(key) {
			return false
		}
		s.space()
		if s.byte(',') {
			s.space()
			continue
		}
		return s.byte('}')
	}
}

// array reads an array, calling elem positioned at each element.
func (s *fastScan) array(elem func() bool) bool {
	if !s.byte('[') {
		return false
	}
	s.space()
	if s.byte(']') {
		return true
	}
	for {
		if !elem() {
			return false
		}
		s.space()
		if s.byte(',') {
			s.space()
			continue
		}
		return s.byte(']')
	}
}

// skip checks and passes any JSON value.
func (s *fastScan) skip(depth int) bool {
	if depth > maxFastDepth || s.i >= len(s.data) {
		return false
	}
	switch c := s.data[s.i]; {
	case c == '{':
		return s.object(func([]byte) bool { return s.skip(depth + 1) })
	case c == '[':
		return s.array(func() bool { return s.skip(depth + 1) })
	case c == '"':
		_, ok := s.plainString()
		return ok
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	}
	_, ok := s.number()
	return ok
}

// raw keeps a copy of the value's text, as json.RawMessage does.
func (s *fastScan) raw(dst *[]byte) bool {
	start := s.i
	if !s.skip(0) {
		return false
	}
	*dst = bytes.Clone(s.data[start:s.i])
	return true
}

// stringValue hands f a string value's text, quotes included.
func (s *fastScan) stringValue(f func(raw []byte) bool) bool {
	start := s.i
	if _, ok := s.plainString(); !ok {
		return false
	}
	return f(s.data[start:s.i])
}

// token reads a "token_id:<id>" spelling.
func (s *fastScan) token(t *tokenSpelling) bool {
	return s.stringValue(func(raw []byte) bool { return t.UnmarshalJSON(raw) == nil })
}

// plainString reads a string without escapes and returns its content.
func (s *fastScan) plainString() ([]byte, bool) {
	if !s.byte('"') {
		return nil, false
	}
	start := s.i
	for ; s.i < len(s.data); s.i++ {
		switch c := s.data[s.i]; {
		case c == '"':
			s.i++
			return s.data[start : s.i-1], true
		case c == '\\' || c < 0x20:
			return nil, false
		}
	}
	return nil, false
}

// number reads a JSON number and returns its text.
func (s *fastScan) number() ([]byte, bool) {
	start := s.i
	s.byte('-')
	switch {
	case s.byte('0'):
	case s.digits() == 0:
		return nil, false
	}
	if s.byte('.') && s.digits() == 0 {
		return nil, false
	}
	if s.byte('e') || s.byte('E') {
		if !s.byte('+') {
			s.byte('-')
		}
		if s.digits() == 0 {
			return nil, false
		}
	}
	return s.data[start:s.i], true
}

func (s *fastScan) digits() int {
	start := s.i
	for s.i < len(s.data) && s.data[s.i] >= '0' && s.data[s.i] <= '9' {
		s.i++
	}
	return s.i - start
}

// uint32 reads a number that is an unsigned integer in range.
func (s *fastScan) uint32(dst *uint32) bool {
	text, ok := s.number()
	if !ok {
		return false
	}
	v, ok := parseUint32(text)
	*dst = v
	return ok
}

// uint32s reads an array of token IDs; null leaves it nil.
func (s *fastScan) uint32s(dst *[]uint32) bool {
	if s.null() {
		return true
	}
	out := make([]uint32, 0, 1)
	ok := s.array(func() bool {
		var v uint32
		if !s.uint32(&v) {
			return false
		}
		out = append(out, v)
		return true
	})
	*dst = out
	return ok
}

// float32 reads a number as encoding/json reads one into a float32.
func (s *fastScan) float32(dst *float32) bool {
	text, ok := s.number()
	if !ok {
		return false
	}
	v, err := strconv.ParseFloat(string(text), 32)
	*dst = float32(v)
	return err == nil
}

// null reads a null, if that is what comes next.
func (s *fastScan) null() bool {
	if bytes.HasPrefix(s.data[s.i:], []byte("null")) {
		return s.literal("null")
	}
	return false
}

func (s *fastScan) literal(lit string) bool {
	if !bytes.HasPrefix(s.data[s.i:], []byte(lit)) {
		return false
	}
	s.i += len(lit)
	return true
}

// byte reads c, if that is what comes next.
func (s *fastScan) byte(c byte) bool {
	if s.i < len(s.data) && s.data[s.i] == c {
		s.i++
		return true
	}
	return false
}

func (s *fastScan) space() {
	for s.i < len(s.data) {
		switch s.data[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}
