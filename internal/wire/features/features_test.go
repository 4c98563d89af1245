package features_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/internal/jsonbody"
	"github.com/coordinator-project/coordinator/internal/wire/features"
)

// twoImages are the entries of the writer tests: a tensor, then one from
// the encoder cache (no tensor).
func twoImages() []features.MultimodalEntry {
	return []features.MultimodalEntry{
		{Index: 0, Hash: "h\"0", KwargsData: []byte(`"dGVuc29y"`), Placeholder: features.Placeholder{Offset: 1, Length: 3}},
		{Index: 1, Hash: "h1", Placeholder: features.Placeholder{Offset: 4, Length: 2}},
	}
}

func TestAppend(t *testing.T) {
	t.Parallel()
	const head = `{"mm_hashes":{"image":["h\"0","h1"]},"mm_placeholders":{"image":[{"offset":1,"length":3},{"offset":4,"length":2}]}`
	tests := []struct {
		name       string
		images     []features.MultimodalEntry
		withKwargs bool
		want       string
	}{
		{name: "without tensors", images: twoImages(), want: head + `}`},
		{name: "with tensors, a missing one as null", images: twoImages(), withKwargs: true,
			want: head + `,"kwargs_data":{"image":["dGVuc29y",null]}}`},
		{name: "no images", want: `{"mm_hashes":{"image":[]},"mm_placeholders":{"image":[]}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.want, string(features.Append([]byte("x"), tt.images, tt.withKwargs)[1:]), "appended after what dst held")
			if tt.withKwargs {
				var s jsonbody.Segments
				features.AppendSegments(&s, tt.images)
				assert.Equal(t, tt.want, string(s.Bytes()), "the segments writer writes the same bytes")
			}
		})
	}
}

func TestAppendTokens(t *testing.T) {
	t.Parallel()
	assert.Equal(t, `{"token_ids":[1,2]}`, string(features.AppendTokens(nil, []byte("[1,2]"), nil)), "text only: no features")
	assert.Equal(t, `{"token_ids":[1,2],"features":{"mm_hashes":{"image":["h\"0","h1"]},`+
		`"mm_placeholders":{"image":[{"offset":1,"length":3},{"offset":4,"length":2}]}}}`,
		string(features.AppendTokens(nil, []byte("[1,2]"), twoImages())), "features without tensors")
}

// TestParseReadsWhatAppendWrites: the one writer and the one parser agree.
func TestParseReadsWhatAppendWrites(t *testing.T) {
	t.Parallel()
	raw := features.Append(nil, twoImages(), true)
	obj, err := jsonbody.ParseIndexed(raw, features.Index)
	require.NoError(t, err)
	got, err := features.Parse(raw, obj)
	require.NoError(t, err)
	want := twoImages()
	want[1].KwargsData = []byte("null")
	require.Len(t, got, len(want))
	for i := range want {
		assert.Equal(t, want[i].Index, got[i].Index)
		assert.Equal(t, want[i].Hash, got[i].Hash)
		assert.Equal(t, want[i].Placeholder, got[i].Placeholder)
		assert.Equal(t, string(want[i].KwargsData), string(got[i].KwargsData))
	}
}

func TestCheckBoundsAndTotal(t *testing.T) {
	t.Parallel()
	images := twoImages()
	require.NoError(t, features.CheckBounds(images, 6), "the last run ends at the prompt's end")
	assert.EqualError(t, features.CheckBounds(images, 5), "mm_placeholders.image[1] (offset 4, length 2) exceeds 5 token_ids")
	assert.EqualError(t, features.CheckBounds(images, 1), "mm_placeholders.image[0].offset 1 out of range for 1 token_ids")
	assert.Equal(t, 5, features.PlaceholderTotal(images))
	huge := []features.MultimodalEntry{{Placeholder: features.Placeholder{Length: int(^uint(0) >> 1)}}, {Placeholder: features.Placeholder{Length: 1}}}
	assert.Equal(t, int(^uint(0)>>1), features.PlaceholderTotal(huge), "an overflowing sum saturates")
}
