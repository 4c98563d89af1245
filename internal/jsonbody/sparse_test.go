package jsonbody_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/internal/jsonbody"
)

// sparseChatIndex is chatIndex keeping only the messages and content
// parts with an image_url, and counting both.
var sparseChatIndex = &jsonbody.Index{Members: map[string]*jsonbody.Index{
	"messages": {Sparse: true, Count: 1, Elements: &jsonbody.Index{Members: map[string]*jsonbody.Index{
		"content": {Sparse: true, Count: 2, Elements: &jsonbody.Index{Members: map[string]*jsonbody.Index{
			"image_url": {},
		}}},
	}}},
	"prompt": {Uint32s: true},
}}

func TestSparseIndexKeepsWhatItFinds(t *testing.T) {
	t.Parallel()
	body := `{"messages":[{"role":"system","content":"s"},{"role":"user","content":[{"type":"text","text":"a"},` +
		`{"type":"image_url","image_url":{"url":"u"}},{"image_url":"v"}]},[1],"x",{"content":[{"text":"b"}]}],"n":1}`
	o, err := jsonbody.ParseIndexed([]byte(body), sparseChatIndex)
	require.NoError(t, err)
	msgs := o.Array("messages")
	require.Equal(t, 5, msgs.Len(), "Len counts every element")
	assert.Equal(t, []int{1}, slices.Collect(msgs.Indexed()), "only the message with an image_url is kept")
	assert.Nil(t, msgs.Object(0))
	assert.Nil(t, msgs.Object(4), "no part of it has an image_url")
	assert.Equal(t, `{"content":[{"text":"b"}]}`, string(msgs.Elem(4)), "an element not kept is read from the text")
	assert.Equal(t, `"x"`, string(msgs.Elem(3)))
	parts := msgs.Object(1).Array("content")
	require.Equal(t, 3, parts.Len())
	assert.Equal(t, []int{1, 2}, slices.Collect(parts.Indexed()), "an image_url of any type is found")
	assert.Nil(t, parts.Object(0))
	url, _ := parts.Object(1).Object("image_url").String("url")
	assert.Equal(t, "u", url)
	assert.Panics(t, func() { msgs.Object(5) }, "out of range")

	leg := o.Clone()
	leg.EditArray("messages").EditObject(1).EditArray("content").EditObject(2).Set("uuid", []byte(`"h"`))
	leg.EditArray("messages").Set(3, []byte(`"y"`))
	want := strings.Replace(strings.Replace(body, `{"image_url":"v"}`, `{"image_url":"v","uuid":"h"}`, 1), `"x"`, `"y"`, 1)
	assert.Equal(t, want, string(leg.Bytes()), "AppendTo writes the elements not kept from the text")
	var segs jsonbody.Segments
	leg.AppendSegments(&segs)
	assert.Equal(t, want, string(segs.Bytes()), "so does AppendSegments")
	assert.Equal(t, body, string(o.Bytes()), "the body the leg was cloned from is untouched")
}

// FuzzSparseIndexedEdits is FuzzIndexedEdits with a sparse index: the
// same edits give the same bodies.
func FuzzSparseIndexedEdits(f *testing.F) {
	addSeeds(f)
	f.Add([]byte(`{"messages":[{"role":"user","content":[{"type":"text","text":"hi"},{"type":"image_url","image_url":{"url":"u","detail":"low"}}]}],"stream":true}`))
	f.Add([]byte(`{"messages":[{"content":[{"image_url":{"url":1}},{"image_url":{}}]},{"content":"x"},[]],"messages":[{"content":[{"image_url":{"a":"b"}}]}]}`))
	f.Add([]byte(`{"messages":[{},{"content":[]},{"content":[{},{"image_url":{"url":"a"}},{}]},1]}`))
	f.Fuzz(func(t *testing.T, data []byte) { checkIndexedEdits(t, data, sparseChatIndex) })
}

func TestLimits(t *testing.T) {
	t.Parallel()
	lim := &jsonbody.Limits{
		Nodes:  jsonbody.Count{Max: 20, Key: "nodes.key"},
		Counts: []jsonbody.Count{{Name: "messages", Max: 2, Key: "msgs.key"}, {Name: "content blocks", Max: 3, Key: "blocks.key"}},
	}
	for _, tc := range []struct {
		name, body, err string
	}{
		{"within", `{"messages":[{"content":[1,2,3]},{"content":"x"}],"prompt":[1,2]}`, ""},
		{"messages", `{"messages":[{},{},{}]}`, "json body has more than 2 messages (msgs.key) at offset 19"},
		{"blocks across messages", `{"messages":[{"content":[1,2]},{"content":[3,4]}]}`, "more than 3 content blocks (blocks.key)"},
		{"values", `{"a":[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]}`, "more than 20 JSON values (nodes.key)"},
		{"token IDs are values", `{"prompt":[` + strings.Repeat("1,", 30) + `1]}`, "more than 20 JSON values"},
		{"strings are values", `{"x":["` + strings.Repeat(`","`, 30) + `"]}`, "more than 20 JSON values"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := jsonbody.ParseIndexedLimits([]byte(tc.body), sparseChatIndex, lim)
			if tc.err == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, jsonbody.ErrLimit)
			assert.Contains(t, err.Error(), tc.err)
			var le *jsonbody.LimitError
			require.True(t, errors.As(err, &le))
			_, err = jsonbody.ParseIndexed([]byte(tc.body), sparseChatIndex)
			assert.NoError(t, err, "without limits the same body parses")
		})
	}
}

func TestMaxIndexedBoundsWhatAParseKeeps(t *testing.T) {
	t.Parallel()
	part := `{"image_url":{}}`
	body := `{"messages":[{"content":[` + strings.Repeat(part+",", jsonbody.MaxIndexed) + part + `]}]}`
	_, err := jsonbody.ParseIndexedLimits([]byte(body), sparseChatIndex, &jsonbody.Limits{})
	require.ErrorIs(t, err, jsonbody.ErrLimit)
	assert.Contains(t, err.Error(), "indexed members and elements")

	text := `{"text":""}`
	body = `{"messages":[{"content":[` + strings.Repeat(text+",", 4*jsonbody.MaxIndexed) + text + `]}]}`
	o, err := jsonbody.ParseIndexedLimits([]byte(body), sparseChatIndex, &jsonbody.Limits{})
	require.NoError(t, err, "parts not kept cost nothing")
	assert.Nil(t, o.Array("messages").Object(0), "nothing found: nothing kept")
}

func TestParseObjectIntoReusesItsMemory(t *testing.T) {
	var o jsonbody.Object
	require.NoError(t, jsonbody.ParseObjectInto(&o, []byte(` {"a":1,"b":"x"} `)))
	assert.Equal(t, []string{"a", "b"}, o.Keys())
	assert.Equal(t, `{"a":1,"b":"x"}`, string(o.Bytes()))
	require.NoError(t, jsonbody.ParseObjectInto(&o, []byte(`{"c":[1]}`)))
	assert.Equal(t, []string{"c"}, o.Keys(), "what o was is gone")
	assert.False(t, o.Edited())
	block := []byte(`{"type":"text","text":"hi"}`)
	allocs := testing.AllocsPerRun(100, func() { _ = jsonbody.ParseObjectInto(&o, block) })
	assert.Zero(t, allocs, "a reused object costs no allocation")
	for _, bad := range []string{`[]`, `{"a":}`, ``, `{} x`} {
		err := jsonbody.ParseObjectInto(&o, []byte(bad))
		require.Error(t, err, bad)
		_, want := jsonbody.ParseObject([]byte(bad))
		assert.Equal(t, want.Error(), err.Error(), "ParseObject's errors: %s", bad)
		assert.Zero(t, o.Len(), "left empty")
	}
}
