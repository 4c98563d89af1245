package pd

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
)

var hasKeySeeds = []struct{ text, key string }{
	{`{"usage":{}}`, `"usage"`},
	{`{"x":"usage"}`, `"usage"`},
	{`usage"`, `"usage"`},
	{`"usage"`, `"usage"`},
	{`{"a":"\"usage\""}`, `"usage"`},
	{`{"usage_x":1,"ausage":2}`, `"usage"`},
	{`{"ausage":2,"usage":1}`, `"usage"`},
	{`""usage"`, `"usage"`},
	{``, `"usage"`},
	{`{"choices":[]}`, `"choices"`},
	{`"`, `""`},
}

// TestHasKey: hasKey finds what bytes.Contains finds.
func TestHasKey(t *testing.T) {
	t.Parallel()
	for _, tt := range hasKeySeeds {
		t.Run(tt.text, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, bytes.Contains([]byte(tt.text), []byte(tt.key)), hasKey([]byte(tt.text), []byte(tt.key)))
		})
	}
}

func FuzzHasKey(f *testing.F) {
	for _, s := range hasKeySeeds {
		f.Add([]byte(s.text), []byte(s.key))
	}
	f.Fuzz(func(t *testing.T, text, key []byte) {
		if len(key) < 2 || key[0] != '"' {
			return
		}
		assert.Equal(t, bytes.Contains(text, key), hasKey(text, key), "%q in %q", key, text)
	})
}
