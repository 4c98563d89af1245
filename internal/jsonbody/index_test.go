package jsonbody_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/internal/jsonbody"
)

// chatIndex indexes a chat body down to each content part's image_url and
// a completions prompt as token IDs.
var chatIndex = &jsonbody.Index{Members: map[string]*jsonbody.Index{
	"messages": {Elements: &jsonbody.Index{Members: map[string]*jsonbody.Index{
		"content": {Elements: &jsonbody.Index{Members: map[string]*jsonbody.Index{
			"image_url": {},
		}}},
	}}},
	"prompt": {Uint32s: true},
}}

func TestParseIndexed(t *testing.T) {
	t.Parallel()
	body := []byte(` {"model" : "m", "messages": [ {"role":"user","content":[{"type":"text","text":"hi"},` +
		` {"type":"image_url","image_url": {"url" : "data:image/png;base64,AAAA", "detail":"low"}}]}, "odd", {"content":"plain"} ] } `)
	o, err := jsonbody.ParseIndexed(body, chatIndex)
	require.NoError(t, err)
	msgs := o.Array("messages")
	require.NotNil(t, msgs)
	require.Equal(t, 3, msgs.Len())
	assert.Nil(t, msgs.Object(1), "a string element is not an object")
	assert.Equal(t, `"odd"`, string(msgs.Elem(1)))
	assert.Nil(t, msgs.Object(2).Array("content"), "a string content is not an array")
	parts := msgs.Object(0).Array("content")
	require.Equal(t, 2, parts.Len())
	img := parts.Object(1).Object("image_url")
	require.NotNil(t, img)
	url, ok := img.String("url")
	require.True(t, ok)
	assert.Equal(t, "data:image/png;base64,AAAA", url)
	assert.Nil(t, o.Object("model"), "a member the index does not name is raw text only")

	var segs jsonbody.Segments
	o.AppendSegments(&segs)
	assert.Equal(t, string(bytes.TrimSpace(body)), string(segs.Bytes()), "nothing edited: the text as parsed")
}

func TestParseIndexedErrorsAreParseObjects(t *testing.T) {
	t.Parallel()
	for _, in := range []string{
		``, `[]`, `null`, `{"messages":[{"content":[{"image_url":{"url":1,}}]}]}`,
		`{"messages":[{"content":[{"image_url":{"url":"\x01"}}]}]}`, `{"prompt":[1,2,]}`, `{"prompt":[1 2]}`,
		`{"prompt":[01]}`, `{"prompt":[1,{"a":}]}`, `{"messages":[` + strings.Repeat("[", jsonbody.MaxDepth) + `]}`,
		`{"messages":[{"content":` + strings.Repeat(`[{"content":`, 600) + `]}]}`, `{"a":1} x`,
	} {
		_, want := jsonbody.ParseObject([]byte(in))
		_, got := jsonbody.ParseIndexed([]byte(in), chatIndex)
		require.Error(t, want, "%q", in)
		if errors.Is(want, jsonbody.ErrTooDeep) {
			assert.ErrorIs(t, got, jsonbody.ErrTooDeep, "%q", in)
			continue
		}
		assert.Equal(t, want.Error(), got.Error(), "%q", in)
	}
}

func TestUint32Stats(t *testing.T) {
	t.Parallel()
	tests := []struct {
		prompt string
		want   jsonbody.Uint32Stats
	}{
		{`[]`, jsonbody.Uint32Stats{Len: 0, Bad: -1, Canonical: true}},
		{`[ ]`, jsonbody.Uint32Stats{Len: 0, Bad: -1}},
		{`[0,1,4294967295]`, jsonbody.Uint32Stats{Len: 3, Bad: -1, First: '0', Canonical: true}},
		{`[1, 2]`, jsonbody.Uint32Stats{Len: 2, Bad: -1, First: '1'}},
		{`[ 1,2]`, jsonbody.Uint32Stats{Len: 2, Bad: -1, First: '1'}},
		{`[1,2 ]`, jsonbody.Uint32Stats{Len: 2, Bad: -1, First: '1'}},
		{`[1.0,3e0]`, jsonbody.Uint32Stats{Len: 2, Bad: -1, First: '1'}},
		{`[1,4294967296,-1]`, jsonbody.Uint32Stats{Len: 3, Bad: 1, First: '1'}},
		{`[-0,1.5]`, jsonbody.Uint32Stats{Len: 2, Bad: 1, First: '-'}},
		{`["a",1]`, jsonbody.Uint32Stats{Len: 2, Bad: 0, First: '"'}},
		{`[[1],2]`, jsonbody.Uint32Stats{Len: 2, Bad: 0, First: '['}},
		{`[12345678901]`, jsonbody.Uint32Stats{Len: 1, Bad: 0, First: '1'}},
	}
	for _, tt := range tests {
		o, err := jsonbody.ParseIndexed([]byte(`{"prompt":`+tt.prompt+`}`), chatIndex)
		require.NoError(t, err, tt.prompt)
		a := o.Array("prompt")
		require.NotNil(t, a, tt.prompt)
		st, ok := a.Uint32Stats()
		require.True(t, ok)
		assert.Equal(t, tt.want, st, tt.prompt)
		assert.Equal(t, tt.want.Len, a.Len())
	}
	o, err := jsonbody.ParseIndexed([]byte(`{"prompt":"text"}`), chatIndex)
	require.NoError(t, err)
	assert.Nil(t, o.Array("prompt"), "a string prompt is not an array")
}

func TestEditsCopyOnWrite(t *testing.T) {
	t.Parallel()
	body := []byte(`{"messages": [{"content": [{"type": "image_url", "image_url": {"url": "x"}}]}], "n": 1}`)
	o, err := jsonbody.ParseIndexed(body, chatIndex)
	require.NoError(t, err)
	leg := o.Clone()
	part := leg.EditArray("messages").EditObject(0).EditArray("content").EditObject(0)
	part.Set("uuid", []byte(`"h"`))
	leg.Set("n", []byte("2"))

	var segs jsonbody.Segments
	leg.AppendSegments(&segs)
	assert.Equal(t, `{"messages":[{"content":[{"type":"image_url","image_url":{"url": "x"},"uuid":"h"}]}],"n":2}`, string(segs.Bytes()),
		"the edited path compact, everything else as sent")
	assert.Equal(t, string(segs.Bytes()), string(leg.Bytes()), "AppendTo writes the same")

	var orig jsonbody.Segments
	o.AppendSegments(&orig)
	assert.Equal(t, string(body), string(orig.Bytes()), "the original is not touched by its clone's edits")
	assert.False(t, o.Edited())
	got, _ := leg.Get("messages")
	assert.JSONEq(t, `[{"content":[{"type":"image_url","image_url":{"url":"x"},"uuid":"h"}]}]`, string(got), "Get sees the nested edit")
}

func TestSegmentsReferenceLongValues(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("A", 4096)
	body := []byte(`{"a":"` + long + `","b":1}`)
	o, err := jsonbody.ParseObject(body)
	require.NoError(t, err)
	o.Set("b", []byte("2"))
	var segs jsonbody.Segments
	o.AppendSegments(&segs)
	parts := segs.Parts()
	require.Len(t, parts, 3, "head, the long value by reference, tail")
	assert.Equal(t, `{"a":`, string(parts[0]))
	assert.Same(t, &body[5], &parts[1][0], "the long value is not copied")
	assert.Equal(t, `,"b":2}`, string(parts[2]))
	assert.Equal(t, len(body), segs.Len())
	assert.Equal(t, `{"a":"`+long+`","b":2}`, string(segs.Bytes()))
}

func TestObjectStringAliases(t *testing.T) {
	t.Parallel()
	body := []byte(`{"plain":"data:abc","esc":"a\nb","num":1}`)
	o, err := jsonbody.ParseObject(body)
	require.NoError(t, err)
	s, ok := o.String("plain")
	require.True(t, ok)
	assert.Equal(t, "data:abc", s)
	body[15] = 'X' // the string aliases the input
	assert.Equal(t, "data:Xbc", s)
	s, ok = o.String("esc")
	require.True(t, ok)
	assert.Equal(t, "a\nb", s)
	_, ok = o.String("num")
	assert.False(t, ok)
	_, ok = o.String("missing")
	assert.False(t, ok)
}

// FuzzParseIndexed checks that ParseIndexed accepts and rejects what
// ParseObject does, that each indexed node holds what parsing its text
// alone would, and that a token-ID array's stats agree with Uint32s and
// AppendUint32s.
func FuzzParseIndexed(f *testing.F) {
	addSeeds(f)
	f.Add([]byte(`{"messages":[{"content":[{"type":"image_url","image_url":{"url":"u"}}]}],"prompt":[1,2, 3]}`))
	f.Add([]byte(`{"prompt":[0,01]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		want, wantErr := jsonbody.ParseObject(data)
		got, err := jsonbody.ParseIndexed(data, chatIndex)
		if wantErr != nil {
			require.Error(t, err)
			if !errors.Is(wantErr, jsonbody.ErrTooDeep) {
				assert.Equal(t, wantErr.Error(), err.Error())
			}
			return
		}
		require.NoError(t, err)
		assert.Equal(t, want.Keys(), got.Keys())
		var segs jsonbody.Segments
		got.AppendSegments(&segs)
		assert.Equal(t, string(bytes.TrimSpace(data)), string(segs.Bytes()))
		if msgs := got.Array("messages"); msgs != nil {
			raw, _ := want.Get("messages")
			elems, err := jsonbody.ParseArray(raw)
			require.NoError(t, err)
			require.Equal(t, len(elems), msgs.Len())
			for i, e := range elems {
				assert.Equal(t, string(e), string(msgs.Elem(i)))
				if o := msgs.Object(i); o != nil {
					alone, err := jsonbody.ParseObject(e)
					require.NoError(t, err)
					assert.Equal(t, alone.Keys(), o.Keys())
				}
			}
		}
		if p := got.Array("prompt"); p != nil {
			checkStats(t, p)
		}
	})
}

func checkStats(t *testing.T, p *jsonbody.Array) {
	t.Helper()
	st, ok := p.Uint32Stats()
	require.True(t, ok)
	raw := p.Bytes()
	var elems []json.RawMessage
	require.NoError(t, json.Unmarshal(raw, &elems))
	assert.Equal(t, len(elems), st.Len)
	ids, err := jsonbody.Uint32s(raw)
	if st.Bad < 0 {
		require.NoError(t, err, "%q", raw)
		assert.Equal(t, st.Canonical, string(jsonbody.AppendUint32s(nil, ids)) == string(raw), "%q", raw)
		return
	}
	require.Error(t, err)
	assert.Contains(t, err.Error(), "index ")
	assert.False(t, st.Canonical)
}

// FuzzIndexedEdits edits every image part of a chat body through a clone
// (a uuid on the part, a new url on its image_url) plus two top-level
// members, and checks the result against the same edits made with
// encoding/json on a decoded copy; the original writes back as parsed.
func FuzzIndexedEdits(f *testing.F) {
	addSeeds(f)
	f.Add([]byte(`{"messages":[{"role":"user","content":[{"type":"text","text":"hi"},{"type":"image_url","image_url":{"url":"u","detail":"low"}}]}],"stream":true}`))
	f.Add([]byte(`{"messages":[{"content":[{"image_url":{"url":1}},{"image_url":{}}]},{"content":"x"},[]],"messages":[{"content":[{"image_url":{"a":"b"}}]}]}`))
	f.Fuzz(func(t *testing.T, data []byte) { checkIndexedEdits(t, data, chatIndex) })
}

// checkIndexedEdits is FuzzIndexedEdits on data indexed with idx.
func checkIndexedEdits(t *testing.T, data []byte, idx *jsonbody.Index) {
	{
		o, err := jsonbody.ParseIndexed(data, idx)
		if err != nil {
			return
		}
		var want map[string]any
		require.NoError(t, unmarshalNumbers(data, &want))
		leg := o.Clone()
		if msgs := leg.Array("messages"); msgs != nil {
			wantMsgs, _ := want["messages"].([]any)
			editMessages(t, leg.EditArray("messages"), wantMsgs)
		}
		leg.Set("max_tokens", []byte("1"))
		want["max_tokens"] = json.Number("1")
		leg.Delete("stream")
		delete(want, "stream")

		var segs jsonbody.Segments
		leg.AppendSegments(&segs)
		assertObject(t, want, segs.Bytes())
		assert.Equal(t, string(leg.Bytes()), string(segs.Bytes()), "AppendTo and AppendSegments agree")
		var orig jsonbody.Segments
		o.AppendSegments(&orig)
		assert.Equal(t, string(bytes.TrimSpace(data)), string(orig.Bytes()), "the clone's edits leave the original as parsed")
	}
}

// editMessages gives every content part object that has an image_url
// object a "uuid", and that image_url a new "url", in both trees.
func editMessages(t *testing.T, msgs *jsonbody.Array, want []any) {
	t.Helper()
	require.Len(t, want, msgs.Len())
	for i := range msgs.Len() {
		if msgs.Object(i) == nil || msgs.Object(i).Array("content") == nil {
			continue
		}
		content := msgs.EditObject(i).EditArray("content")
		wantContent := want[i].(map[string]any)["content"].([]any)
		for j := range content.Len() {
			if content.Object(j) == nil || content.Object(j).Object("image_url") == nil {
				continue
			}
			part := content.EditObject(j)
			part.Set("uuid", []byte(`"h`+string(rune('a'+j%26))+`"`))
			part.EditObject("image_url").Set("url", []byte(`"data:x"`))
			wantPart := wantContent[j].(map[string]any)
			wantPart["uuid"] = "h" + string(rune('a'+j%26))
			wantPart["image_url"].(map[string]any)["url"] = "data:x"
		}
	}
}

// BenchmarkUint32Stats scans a 32k-token prompt as ParseIndexed does, with
// Uint32s, against decoding it.
func BenchmarkUint32Stats(b *testing.B) {
	ids := make([]uint32, 32768)
	for i := range ids {
		ids[i] = uint32(i*7919) % 152064
	}
	body := append(append([]byte(`{"prompt":`), jsonbody.AppendUint32s(nil, ids)...), '}')
	b.Run("ParseIndexed", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := jsonbody.ParseIndexed(body, chatIndex); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("ParseObject", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := jsonbody.ParseObject(body); err != nil {
				b.Fatal(err)
			}
		}
	})
}
