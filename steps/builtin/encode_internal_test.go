package builtin

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/coordinator-project/coordinator/internal/jsonbody"
	"github.com/coordinator-project/coordinator/internal/requestbody"
	"github.com/coordinator-project/coordinator/internal/wire/features"
)

func TestEncodeTokenIDs(t *testing.T) {
	t.Parallel()
	prompt := []uint32{7, 32000, 32000, 32000, 2345}
	tests := []struct {
		name   string
		prompt []uint32
		p      features.Placeholder
		want   []uint32
	}{
		{name: "bos then the placeholder token", prompt: []uint32{1, 32000, 32000, 32000}, p: features.Placeholder{Offset: 1, Length: 3}, want: []uint32{1, 32000, 32000, 32000}},
		{name: "bos is the prompt's first token", prompt: prompt, p: features.Placeholder{Offset: 1, Length: 2}, want: []uint32{7, 32000, 32000}},
		{name: "placeholder token taken at the offset", prompt: prompt, p: features.Placeholder{Offset: 4, Length: 1}, want: []uint32{7, 2345}},
		{name: "offset past the prompt gives 0", prompt: prompt, p: features.Placeholder{Offset: 5, Length: 2}, want: []uint32{7, 0, 0}},
		{name: "negative offset gives 0", prompt: prompt, p: features.Placeholder{Offset: -1, Length: 1}, want: []uint32{7, 0}},
		{name: "no prompt gives bos 1 and placeholder 0", p: features.Placeholder{Offset: 1, Length: 2}, want: []uint32{1, 0, 0}},
		{name: "zero length is bos alone", prompt: prompt, p: features.Placeholder{Offset: 1}, want: []uint32{7}},
		{name: "full uint32 range (D16)", prompt: []uint32{4294967295, 4294967294}, p: features.Placeholder{Offset: 1, Length: 1}, want: []uint32{4294967295, 4294967294}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			held := requestbody.NewTokens(tt.prompt)
			assert.Equal(t, tt.want, encodeTokenIDs(&held, tt.p), "the IDs held")
			encoded := requestbody.TokensOfJSON(jsonbody.AppendUint32s(nil, tt.prompt), len(tt.prompt))
			assert.Equal(t, tt.want, encodeTokenIDs(&encoded, tt.p), "their JSON held")
		})
	}
}
