package tokens

import (
	"bytes"

	"github.com/coordinator-project/coordinator/internal/jsonbody"
)

// This file reads the usual shape of a worker's answer or stream event
// with a jsonbody.Scanner instead of encoding/json, which spends most of a
// rollout stream's CPU in the coordinator (reflection, and a validating
// pass before the decoding one). fastAnswer takes only what it reads
// exactly as encoding/json would: keys of the exact case, no duplicate
// member it reads, numbers that fit their fields, no null where
// encoding/json would call a decoder with it. Anything else, valid or
// not, makes it give up (false) and readAnswer decodes the answer with
// encoding/json as before. FuzzFastAnswer holds that whatever it takes,
// it reads as encoding/json does.

// answerScan reads an answer into sc.
type answerScan struct {
	jsonbody.Scanner
	sc *scratch // what the decoded slices are windows of
}

// fastAnswer decodes data into a, or reports false, having maybe written
// part of a. The slices it reads are windows of sc's, which it appends to.
func fastAnswer(data []byte, a *generateAnswer, sc *scratch) bool {
	s := answerScan{Scanner: jsonbody.NewScanner(data), sc: sc}
	var seen uint8
	ok := s.Object(func(key []byte) bool {
		switch string(key) {
		case "choices":
			return once(&seen, 1) && s.choices(&a.Choices)
		case "usage":
			return once(&seen, 2) && s.usage(&a.Usage)
		case "prompt_logprobs":
			return once(&seen, 4) && s.readRaw((*[]byte)(&a.PromptLogprobs))
		case "error":
			return once(&seen, 8) && s.readRaw((*[]byte)(&a.Error))
		case "code":
			return once(&seen, 16) && s.readRaw((*[]byte)(&a.Code))
		case "object":
			return once(&seen, 32) && s.readString(func(raw []byte) bool { return a.Object.UnmarshalJSON(raw) == nil })
		}
		return s.unknown(key, "choices", "usage", "prompt_logprobs", "error", "code", "object")
	})
	return ok && s.End()
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

func (s *answerScan) choices(dst *[]generateChoice) bool {
	if s.Null() {
		return true // a nil slice stays nil
	}
	var ok bool
	*dst, ok = pooledArray(s, &s.sc.choices, s.choice)
	return ok
}

func (s *answerScan) choice(c *generateChoice) bool {
	var seen uint8
	return s.Object(func(key []byte) bool {
		switch string(key) {
		case "index":
			return once(&seen, 1) && s.readUint32(&c.Index)
		case "token_ids":
			return once(&seen, 2) && s.readUint32s(&c.TokenIDs)
		case "finish_reason": // UnmarshalJSON("null") leaves it unspecified
			return s.nullOr(&seen, 4, func() bool {
				return s.readString(func(raw []byte) bool { return c.FinishReason.UnmarshalJSON(raw) == nil })
			})
		case "logprobs":
			return s.nullOr(&seen, 8, func() bool {
				s.sc.logprobs = append(s.sc.logprobs, chatLogprobs{})
				c.Logprobs = &s.sc.logprobs[len(s.sc.logprobs)-1]
				return s.logprobs(c.Logprobs)
			})
		case "weight_versions":
			return s.nullOr(&seen, 16, func() bool {
				var ok bool
				c.WeightVersions, ok = pooledArray(s, &s.sc.spans, s.weightSpan)
				return ok
			})
		}
		return s.unknown(key, "index", "token_ids", "finish_reason", "logprobs", "weight_versions")
	})
}

// weightSpan reads a WeightVersionSpan; a negative or wide bound is left to
// encoding/json (and weightVersions refuses it).
func (s *answerScan) weightSpan(w *weightSpan) bool {
	var seen uint8
	return s.Object(func(key []byte) bool {
		switch string(key) {
		case "version": // null leaves it nil
			return s.nullOr(&seen, 1, func() bool {
				return s.readString(func(raw []byte) bool {
					v, ok := jsonbody.String(raw)
					w.Version = &v
					return ok
				})
			})
		case "start":
			return once(&seen, 2) && s.readSpanBound(&w.Start)
		case "end":
			return once(&seen, 4) && s.readSpanBound(&w.End)
		}
		return s.unknown(key, "version", "start", "end")
	})
}

func (s *answerScan) logprobs(l *chatLogprobs) bool {
	var seen uint8
	return s.Object(func(key []byte) bool {
		if string(key) != "content" {
			return s.unknown(key, "content")
		}
		return s.nullOr(&seen, 1, func() bool {
			var ok bool
			l.Content, ok = pooledArray(s, &s.sc.content, s.logprob)
			return ok
		})
	})
}

func (s *answerScan) logprob(e *chatLogprob) bool {
	var seen uint8
	return s.Object(func(key []byte) bool {
		switch string(key) {
		case "token":
			return once(&seen, 1) && s.token(&e.Token)
		case "logprob":
			return once(&seen, 2) && s.readFloat32(&e.Logprob)
		case "top_logprobs":
			return s.nullOr(&seen, 4, func() bool {
				var ok bool
				e.TopLogprobs, ok = pooledArray(s, &s.sc.tops, s.topLogprob)
				return ok
			})
		}
		return s.unknown(key, "token", "logprob", "top_logprobs")
	})
}

func (s *answerScan) topLogprob(t *topLogprob) bool {
	var seen uint8
	return s.Object(func(key []byte) bool {
		switch string(key) {
		case "token":
			return once(&seen, 1) && s.token(&t.Token)
		case "logprob":
			return once(&seen, 2) && s.readFloat32(&t.Logprob)
		}
		return s.unknown(key, "token", "logprob")
	})
}

func (s *answerScan) usage(dst **generateUsage) bool {
	if s.Null() {
		return true
	}
	u := &generateUsage{}
	*dst = u
	var seen uint8
	return s.Object(func(key []byte) bool {
		switch string(key) {
		case "prompt_tokens":
			return once(&seen, 1) && s.readUint32(&u.PromptTokens)
		case "completion_tokens":
			return once(&seen, 2) && s.readUint32(&u.CompletionTokens)
		case "total_tokens":
			return once(&seen, 4) && s.readUint32(&u.TotalTokens)
		case "prompt_tokens_details":
			return s.nullOr(&seen, 8, func() bool {
				u.PromptTokensDetails = &struct {
					CachedTokens *uint32 `json:"cached_tokens"`
				}{}
				var seenDetails uint8
				return s.Object(func(key []byte) bool {
					if string(key) != "cached_tokens" {
						return s.unknown(key, "cached_tokens")
					}
					return s.nullOr(&seenDetails, 1, func() bool {
						u.PromptTokensDetails.CachedTokens = new(uint32)
						return s.readUint32(u.PromptTokensDetails.CachedTokens)
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
func (s *answerScan) nullOr(seen *uint8, bit uint8, read func() bool) bool {
	if !once(seen, bit) {
		return false
	}
	return s.Null() || read()
}

// unknown skips the value of a member nobody reads, unless its key could
// name a field as encoding/json matches keys (any case, Unicode folding):
// a key with a byte past ASCII, or one of known in another case.
func (s *answerScan) unknown(key []byte, known ...string) bool {
	for _, c := range key {
		if c >= 0x80 {
			return false
		}
	}
	for _, k := range known {
		// An ASCII key folds only to one of its length.
		if len(key) == len(k) && bytes.EqualFold(key, []byte(k)) {
			return false
		}
	}
	return s.Skip()
}

// token reads a "token_id:<id>" spelling.
func (s *answerScan) token(t *tokenSpelling) bool {
	return s.readString(func(raw []byte) bool { return t.UnmarshalJSON(raw) == nil })
}

// pooledArray reads an array into the next elements of *pool (a slice of
// the scratch), elem reading each into a zeroed element, and returns them,
// never nil: encoding/json reads [] as an empty slice. elem must not read
// into the same pool (no type of the answer nests in itself): an append
// there would move the element it is filling.
func pooledArray[T any](s *answerScan, pool *[]T, elem func(*T) bool) ([]T, bool) {
	start := len(*pool)
	ok := s.Array(func() bool {
		var zero T
		*pool = append(*pool, zero)
		return elem(&(*pool)[len(*pool)-1])
	})
	out := (*pool)[start:len(*pool):len(*pool)]
	if out == nil {
		out = []T{}
	}
	return out, ok
}

// The readers below read one value into a field of the answer.

// readUint32s reads an array of token IDs; null leaves it nil.
func (s *answerScan) readUint32s(dst *[]uint32) bool {
	if s.Null() {
		return true
	}
	var ok bool
	*dst, ok = pooledArray(s, &s.sc.tokenIDs, s.readUint32)
	return ok
}

func (s *answerScan) readUint32(dst *uint32) bool {
	var ok bool
	*dst, ok = s.Uint32()
	return ok
}

// readSpanBound reads a span's start or end, if it fits a uint32.
func (s *answerScan) readSpanBound(dst *int64) bool {
	v, ok := s.Uint32()
	*dst = int64(v)
	return ok
}

func (s *answerScan) readFloat32(dst *float32) bool {
	var ok bool
	*dst, ok = s.Float32()
	return ok
}

// readRaw keeps a copy of the value's text, as json.RawMessage does.
func (s *answerScan) readRaw(dst *[]byte) bool {
	raw, ok := s.Raw()
	*dst = bytes.Clone(raw)
	return ok
}

// readString hands f a string value's text, quotes included, as
// encoding/json hands it to an UnmarshalJSON.
func (s *answerScan) readString(f func(raw []byte) bool) bool {
	raw, ok := s.Quoted()
	return ok && f(raw)
}
