package imageparts_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/internal/jsonbody"
	"github.com/coordinator-project/coordinator/internal/wire/imageparts"
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

func TestFindInResponsesAndMessages(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		shape  imageparts.Shape
		index  *jsonbody.Index
		body   string
		urls   []string
		wheres []string
		after  string // the body after Replace of image 0 with a data URI
	}{
		{
			name: "responses", shape: imageparts.Responses, index: imageparts.ResponsesIndex,
			body: `{"input":[{"role":"user","content":"text only"},{"role":"user","content":[{"type":"input_text","text":"hi"},` +
				`{"type":"input_image","image_url":"a"},{"type":"input_image","image_url":{"url":"x"}},{"type":"input_image"},` +
				`{"type":"image_url","image_url":"y"}]},{"type":"function_call_output","output":"z"},` +
				`{"role":"user","content":[{"type":"input_image","image_url":"b","detail":"low"}]}]}`,
			urls:   []string{"a", "b"},
			wheres: []string{" (in input[1].content[1].image_url)", " (in input[3].content[0].image_url)"},
			after: `{"input":[{"role":"user","content":"text only"},{"role":"user","content":[{"type":"input_text","text":"hi"},` +
				`{"type":"input_image","image_url":"data:image/png;base64,AAAA"},{"type":"input_image","image_url":{"url":"x"}},{"type":"input_image"},` +
				`{"type":"image_url","image_url":"y"}]},{"type":"function_call_output","output":"z"},` +
				`{"role":"user","content":[{"type":"input_image","image_url":"b","detail":"low"}]}]}`,
		},
		{
			name: "messages", shape: imageparts.Messages, index: imageparts.MessagesIndex,
			body: `{"messages":[{"role":"user","content":[{"type":"image","source":{"type":"url","url":"https://h/a.png"}},` +
				`{"type":"image","source":{"type":"base64","media_type":"image/gif","data":"R0lG"}},` +
				`{"type":"image","source":{"type":"file","file_id":"f"}},{"type":"image","source":"u"},{"type":"text","text":"t"}]}]}`,
			urls:   []string{"https://h/a.png", "data:image/gif;base64,R0lG"},
			wheres: []string{" (in messages[0].content[0].source)", " (in messages[0].content[1].source)"},
			after: `{"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AAAA"}},` +
				`{"type":"image","source":{"type":"base64","media_type":"image/gif","data":"R0lG"}},` +
				`{"type":"image","source":{"type":"file","file_id":"f"}},{"type":"image","source":"u"},{"type":"text","text":"t"}]}]}`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			root, err := jsonbody.ParseIndexed([]byte(tc.body), tc.index)
			require.NoError(t, err)
			locs := imageparts.FindIn(root, tc.shape)
			var urls, wheres []string
			require.NoError(t, locs.Each(root, func(_ int, p imageparts.Part) error {
				urls, wheres = append(urls, p.URL), append(wheres, p.Where)
				assert.Nil(t, p.ImageURL, "chat's image_url object only")
				return nil
			}))
			assert.Equal(t, tc.urls, urls)
			assert.Equal(t, tc.wheres, wheres)
			leg := root.Clone()
			locs.Replace(leg, 0, []byte(`"data:image/png;base64,AAAA"`), "image/png", "AAAA")
			assert.Equal(t, tc.after, string(leg.Bytes()))
			assert.Equal(t, tc.body, string(root.Bytes()), "the body the leg was cloned from is untouched")
		})
	}
}
