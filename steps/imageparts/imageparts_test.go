package imageparts_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/internal/jsonbody"
	"github.com/coordinator-project/coordinator/steps/imageparts"
)

// chat has three image parts among shapes that are not image parts.
const chat = `{"messages":[` +
	`{"role":"system","content":"text only"},` +
	`{"role":"user","content":[{"type":"text","text":"hi"},{"type":"image_url","image_url":{"url":"a","detail":"low"}},` +
	`{"type":"image_url","image_url":{"url":1}},{"type":"image_url"},{"type":"image","image_url":{"url":"x"}},` +
	`{"type":"image_url","image_url":{"url":"b"}}]},` +
	`"not a message",` +
	`{"role":"user","content":[{"type":"image_url","image_url":{"url":"c"}}]}]}`

func TestFindAndEach(t *testing.T) {
	t.Parallel()
	root, err := jsonbody.ParseIndexed([]byte(chat), imageparts.Index)
	require.NoError(t, err)
	locs := imageparts.Find(root)
	require.Len(t, locs, 3, "only content parts of type image_url with a string url")
	var got []imageparts.Part
	require.NoError(t, locs.Each(root, func(k int, p imageparts.Part) error {
		assert.Equal(t, len(got), k)
		got = append(got, p)
		return nil
	}))
	require.Len(t, got, 3)
	assert.Equal(t, []string{"a", "b", "c"}, []string{got[0].URL, got[1].URL, got[2].URL})
	assert.Equal(t, [][2]int{{1, 1}, {1, 5}, {3, 0}}, [][2]int{{got[0].Message, got[0].Content}, {got[1].Message, got[1].Content}, {got[2].Message, got[2].Content}})
	detail, _ := got[0].ImageURL.String("detail")
	assert.Equal(t, "low", detail)
}

func TestFindWithoutMessages(t *testing.T) {
	t.Parallel()
	for _, body := range []string{`{}`, `{"messages":null}`, `{"messages":{}}`, `{"messages":[]}`} {
		root, err := jsonbody.ParseIndexed([]byte(body), imageparts.Index)
		require.NoError(t, err)
		assert.Empty(t, imageparts.Find(root), body)
	}
}

func TestEditOnALegLeavesTheBody(t *testing.T) {
	t.Parallel()
	root, err := jsonbody.ParseIndexed([]byte(chat), imageparts.Index)
	require.NoError(t, err)
	locs := imageparts.Find(root)
	leg := root.Clone()
	part, imageURL := locs.Edit(leg, 1)
	part.Set("uuid", []byte(`"h1"`))
	imageURL.Set("url", []byte(`"data:,"`))
	assert.Equal(t, chat, string(root.Bytes()), "the body does not see the leg's edits")
	var urls []string
	require.NoError(t, locs.Each(leg, func(_ int, p imageparts.Part) error {
		urls = append(urls, p.URL)
		return nil
	}))
	assert.Equal(t, []string{"a", "data:,", "c"}, urls, "the leg does")
	assert.Contains(t, string(leg.Bytes()), `{"type":"image_url","image_url":{"url":"data:,"},"uuid":"h1"}`)
}
