package builtin_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/internal/wire/legs"
	"github.com/coordinator-project/coordinator/steps"
	"github.com/coordinator-project/coordinator/steps/builtin"
)

// FuzzRenderAnswer has a render service answer 200 with arbitrary bytes, to
// a chat render (chat true) and to a completions render of a string prompt,
// through the real render step over loopback (seeds here and in
// testdata/fuzz/FuzzRenderAnswer). The step must not panic; it must take
// exactly the answers refRender takes, with the same token IDs and images;
// and a bad answer is never blamed on the client.
func FuzzRenderAnswer(f *testing.F) {
	for _, seed := range []struct {
		answer string
		chat   bool
	}{
		{`{"token_ids":[1,2,3]}`, true},
		{`{"token_ids":[],"features":null}`, true},
		{`{"token_ids":[9906,4294967295],"features":{"mm_hashes":{"image":["h0","h1"]},` +
			`"mm_placeholders":{"image":[{"offset":0,"length":1},{"offset":1,"length":1}]},"kwargs_data":{"image":["AAAA",null]}}}`, true},
		{`{"token_ids":[1],"features":{"mm_hashes":{"image":["h"]}}}`, true},
		{`{"token_ids":[1],"features":{"mm_hashes":{"image":["h"]},"mm_placeholders":{"image":[]}}}`, true},
		{`{"token_ids":[1],"features":{"mm_hashes":{"audio":["a"]},"mm_placeholders":null}}`, true},
		{`{"token_ids":[1.0,2e0,-0],"features":{"mm_hashes":{"image":[]}}}`, true},
		{`{"token_ids":[4294967296]}`, true},
		{`{"token_ids":[-1]}`, true},
		{`{"token_ids":"1 2"}`, true},
		{`{"token_ids":[1],"token_ids":[2]}`, true},
		{`{"TOKEN_IDS":[1]}`, true},
		{`{"token_ids":[1],"features":{"mm_hashes":{"image":["h"]},"mm_placeholders":{"image":[{"offset":-1,"length":1}]}}}`, true},
		{`{"token_ids":[1],"features":{"mm_hashes":{"image":[7]},"mm_placeholders":{"image":[{"offset":0,"length":1}]}}}`, true},
		{`{"token_ids":[1],"features":{"mm_hashes":{"image":["h"]},"mm_placeholders":{"image":[{"offset":0,"length":1}]},"kwargs_data":{"image":[1]}}}`, true},
		{"{\"token_ids\":[1],\"x\":\"\xff\"}", true},
		{`[{"token_ids":[5,6]}]`, false},
		{`[{"token_ids":[5]},{"token_ids":[6]}]`, false},
		{`[]`, false},
		{`{"token_ids":[5]}`, false},
		{`[{"token_ids":[5.5]}]`, false},
		{``, true},
		{`null`, false},
	} {
		f.Add([]byte(seed.answer), seed.chat)
	}
	var answer atomic.Pointer[[]byte]
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(*answer.Load())
	}))
	f.Cleanup(srv.Close)
	step, err := builtin.NewRenderPlugin(builtin.RenderDeps{}).New(map[string]any{"address": srv.URL})
	require.NoError(f, err)
	f.Cleanup(step.(*builtin.Render).Close)

	f.Fuzz(func(t *testing.T, data []byte, chat bool) {
		answer.Store(&data)
		rc := &steps.RequestContext{RequestID: "fuzz", Format: legs.FormatChat,
			Body: []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`)}
		if !chat {
			rc.Format, rc.Body = legs.FormatCompletions, []byte(`{"model":"m","prompt":"hi","max_tokens":3}`)
		}
		err := step.Execute(context.Background(), rc)
		want, wantErr := refRender(data, chat)
		if wantErr != nil {
			require.Error(t, err, "the reference refuses the answer: %v", wantErr)
			assert.NotErrorIs(t, err, legs.ErrInvalidRequest, "a bad render answer is not the client's fault")
			return
		}
		require.NoError(t, err)
		assert.Equal(t, want.ids, rc.Tokens.IDs())
		require.Len(t, rc.Multimodal, len(want.images))
		for i, img := range want.images {
			e := rc.Multimodal[i]
			assert.Equal(t, i, e.Index)
			assert.Equal(t, img.hash, e.Hash)
			assert.Equal(t, img.offset, e.Placeholder.Offset)
			assert.Equal(t, img.length, e.Placeholder.Length)
			assert.JSONEq(t, img.kwargs, string(e.KwargsData))
		}
		if !chat {
			var body map[string]json.RawMessage
			require.NoError(t, json.Unmarshal(editedBody(rc), &body))
			var prompt []uint32
			require.NoError(t, json.Unmarshal(body["prompt"], &prompt))
			assert.Equal(t, want.ids, prompt, "the prompt is replaced by the token IDs")
			assert.JSONEq(t, "3", string(body["max_tokens"]), "the rest of the body is kept")
		}
	})
}

// rendered is what a render answer gives: the token IDs and the images.
type rendered struct {
	ids    []uint32
	images []renderedImage
}

type renderedImage struct {
	hash           string
	offset, length int
	kwargs         string // raw JSON: a string or null
}

// refRender reads a render answer with encoding/json, by the contract the
// render step documents: chat answers {"token_ids": [...], "features": ...};
// completions answers [{"token_ids": [...]}]. Keys match exactly (not
// encoding/json's case-insensitive field match); the last of duplicate keys
// wins; the document must be valid UTF-8.
func refRender(answer []byte, chat bool) (rendered, error) {
	if !utf8.Valid(answer) {
		return rendered{}, errors.New("invalid UTF-8")
	}
	v, err := decodeNumbers(answer)
	if err != nil {
		return rendered{}, err
	}
	if !chat {
		arr, ok := v.([]any)
		if !ok || len(arr) != 1 {
			return rendered{}, errors.New("not one element")
		}
		v = arr[0]
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return rendered{}, errors.New("not an object")
	}
	var out rendered
	raw, ok := obj["token_ids"].([]any)
	if !ok {
		return rendered{}, errors.New("token_ids")
	}
	out.ids = make([]uint32, len(raw))
	for i, x := range raw {
		n, ok := integer(x, math.MaxUint32)
		if !ok {
			return rendered{}, fmt.Errorf("token_ids[%d]", i)
		}
		out.ids[i] = uint32(n)
	}
	if chat {
		out.images, err = refFeatures(obj["features"])
	}
	return out, err
}

// refFeatures reads the image entries of a features value (see
// features.Parse's contract).
func refFeatures(v any) ([]renderedImage, error) {
	if v == nil {
		return nil, nil
	}
	features, ok := v.(map[string]any)
	if !ok {
		return nil, errors.New("features")
	}
	hashes, _, err := imageList(features, "mm_hashes")
	if err != nil || len(hashes) == 0 {
		return nil, err
	}
	placeholders, ok, err := imageList(features, "mm_placeholders")
	if err != nil || !ok || len(placeholders) != len(hashes) {
		return nil, errors.New("mm_placeholders")
	}
	kwargs, hasKwargs, err := imageList(features, "kwargs_data")
	if err != nil || hasKwargs && len(kwargs) != len(hashes) {
		return nil, errors.New("kwargs_data")
	}
	images := make([]renderedImage, len(hashes))
	for i := range hashes {
		hash, ok := hashes[i].(string)
		p, okP := placeholders[i].(map[string]any)
		if !ok || !okP {
			return nil, errors.New("hash or placeholder")
		}
		offset, okO := integer(p["offset"], math.MaxInt)
		length, okL := integer(p["length"], math.MaxInt)
		if !okO || !okL {
			return nil, errors.New("placeholder")
		}
		kw := "null"
		if hasKwargs && kwargs[i] != nil {
			s, ok := kwargs[i].(string)
			if !ok {
				return nil, errors.New("kwargs_data item")
			}
			b, _ := json.Marshal(s)
			kw = string(b)
		}
		images[i] = renderedImage{hash: hash, offset: int(offset), length: int(length), kwargs: kw}
	}
	return images, nil
}

// imageList is features[field].image: present false when field, or its
// image member, is absent or null; an error when either has another shape.
func imageList(features map[string]any, field string) ([]any, bool, error) {
	v, ok := features[field]
	if !ok || v == nil {
		return nil, false, nil
	}
	byModality, ok := v.(map[string]any)
	if !ok {
		return nil, false, errors.New(field)
	}
	img, ok := byModality["image"]
	if !ok || img == nil {
		return nil, false, nil
	}
	list, ok := img.([]any)
	if !ok {
		return nil, false, errors.New(field + ".image")
	}
	return list, true, nil
}

// decodeNumbers decodes one JSON document with numbers as json.Number.
func decodeNumbers(data []byte) (any, error) {
	if !json.Valid(data) {
		return nil, errors.New("invalid JSON")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	err := dec.Decode(&v)
	return v, err
}

// integer reads a json.Number that is an integer in [0, limit], whatever
// its spelling (1, 1.0, 1e0, -0, 0e99999999).
func integer(v any, limit uint64) (uint64, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	mantissa, exp, _ := strings.Cut(strings.ToLower(string(n)), "e")
	if strings.Trim(mantissa, "-0.") == "" {
		return 0, true
	}
	if len(strings.TrimLeft(exp, "+-0")) > 4 {
		// 10^10000 and more (or less): no integer up to 2^64 unless the
		// mantissa has thousands of digits, which fuzz inputs do not.
		return 0, false
	}
	r, ok := new(big.Rat).SetString(string(n))
	if !ok || !r.IsInt() || r.Sign() < 0 || !r.Num().IsUint64() || r.Num().Uint64() > limit {
		return 0, false
	}
	return r.Num().Uint64(), true
}
