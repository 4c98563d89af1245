package requestbody

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/coordinator-project/coordinator/internal/jsonbody"
	"github.com/coordinator-project/coordinator/internal/wire/legs"
)

// fuzzCheck checks an arbitrary body as format f: no panic, and every
// refusal is the client's fault.
func fuzzCheck(f *testing.F, format legs.Format, seeds []string) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		root, err := jsonbody.ParseObject(body)
		if err != nil {
			return // the front answers a body that is not an object before any check
		}
		if err := Check(root, format); err != nil {
			assert.True(t, errors.Is(err, legs.ErrInvalidRequest), "%v", err)
		}
	})
}

// FuzzCheckResponses fuzzes the Responses body check.
func FuzzCheckResponses(f *testing.F) {
	fuzzCheck(f, legs.FormatResponses, []string{
		`{"input":"hi"}`, `{"input":[{"role":"user","content":[{"type":"input_image","image_url":"x"}]}]}`,
		`{"input":[{"role":"user","content":"x"},{"type":"message"}]}`, `{"input":[1,{}]}`, `{"store":true}`,
		`{"input":[{"role":"user","content":[{"type":1}]}]}`, `{"input":"x","max_output_tokens":-1}`, `{}`,
	})
}

// FuzzCheckMessages fuzzes the Messages body check.
func FuzzCheckMessages(f *testing.F) {
	fuzzCheck(f, legs.FormatMessages, []string{
		`{"max_tokens":1,"messages":[{"role":"user","content":"hi"}]}`,
		`{"max_tokens":1,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"url","url":"u"}}]}]}`,
		`{"max_tokens":1,"messages":[{"role":"user","content":[{"type":"image","source":"x"}]}]}`,
		`{"max_tokens":1,"system":[{"type":"text"}],"messages":[]}`, `{"max_tokens":"1"}`, `{}`,
	})
}
