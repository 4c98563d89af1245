package builtin_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/netip"
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/internal/media"
	"github.com/coordinator-project/coordinator/internal/wire/legs"
	"github.com/coordinator-project/coordinator/steps"
	"github.com/coordinator-project/coordinator/steps/builtin"
)

// fuzzImageHost stands for the fuzz origin in seeds; the target swaps in
// the origin's real address.
const fuzzImageHost = "http://img/"

// FuzzReplaceMediaURLsBody runs the step on arbitrary bodies (seeds here
// and in testdata/fuzz/FuzzReplaceMediaURLsBody). It must not panic, and
// on success the body must still be valid JSON that differs from the input
// only in the image URLs it inlined, with one entry per image part.
// Downloads reach only the test's origin: the address policy refuses all
// but 127.0.0.1, no name resolves, and inputs naming another port of
// 127.0.0.1 are skipped.
func FuzzReplaceMediaURLsBody(f *testing.F) {
	for _, seed := range []string{
		`{}`, `[]`, `null`, `{"messages":null}`, `{"messages":"x"}`, `{"messages":[1,"a",null,{}]}`,
		`{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
		`{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"http://img/a.png","detail":"low"}}]}]}`,
		`{"messages":[{"content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}},{"type":"text","text":"x"},{"type":"image_url","image_url":{"url":"http://img/b.gif"}}]},{"content":[{"type":"image_url","image_url":{"url":"data:image/webp;base64,UklG"}}]}]}`,
		`{"messages":[{"content":[{"type":"image_url","image_url":{"url":"data:text/html;base64,AAAA"}}]}]}`,
		`{"messages":[{"content":[{"type":"image_url","image_url":{"url":"ftp://img/a"}}]}]}`,
		`{"messages":[{"content":[{"type":"image_url","image_url":{"url":"http://img/a.png"}},{"type":"image_url","image_url":{"url":"http://img/404"}}]}]}`,
		`{"messages":[{"content":[{"type":"image_url","type":"text","image_url":{"url":"http://img/a.png","url":7}}]}]}`,
		`{"messages":[{"content":[{"type":"image_url","image_url":{"url":"http:\/\/img\/a.png"}}], "content":[]}]}`,
		`{"messages":[{"content":[{"type":"image_url","image_url":{"url":"data:image/jpeg;base64,\u0041"}}]}],"messages":[]}`,
		`{"messages":[{"content":[{"type":"image_url","image_url":{}},{"type":"image_url"},{"image_url":{"url":"x"}}]}]}`,
		"{\"messages\":[{\"content\":[{\"type\":\"image_url\",\"image_url\":{\"url\":\"\xff\"}}]}]}",
	} {
		f.Add([]byte(seed))
	}
	o := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/404":
			http.NotFound(w, r)
		case "/b.gif":
			serveImage("image/gif", mediaGIF)(w, r)
		default:
			serveImage("image/png", mediaPNG)(w, r)
		}
	})
	origin := newMediaOrigin(f, o)
	loopback := netip.MustParseAddr("127.0.0.1")
	onlyOrigin := func(a netip.Addr) error {
		if a == loopback {
			return nil
		}
		return media.AddressPolicy(false)(a)
	}
	step, err := builtin.NewReplaceMediaURLsPluginWith(media.WithPolicy(onlyOrigin), media.WithResolver(mediaResolver{})).
		New(map[string]any{"max_concurrent_downloads": 2, "download_timeout": "5s", "max_multimodal_entries": 16})
	require.NoError(f, err)

	f.Fuzz(func(t *testing.T, body []byte) {
		body = bytes.ReplaceAll(body, []byte(fuzzImageHost), []byte(origin.URL+"/"))
		var doc any
		valid := json.Valid(body)
		if valid {
			require.NoError(t, decodeJSON(body, &doc))
			for _, u := range fuzzImageURLs(doc) {
				// Only 127.0.0.1 passes the policy (names do not resolve):
				// keep off its other ports.
				p, err := url.Parse(u)
				if err != nil || p.Host == origin.Listener.Addr().String() {
					continue
				}
				if a, err := netip.ParseAddr(p.Hostname()); err == nil && a.Unmap().WithZone("") == loopback {
					t.Skip("names another port of 127.0.0.1")
				}
			}
		}
		rc := &steps.RequestContext{Format: legs.FormatChat, Body: body}
		err := step.Execute(context.Background(), rc)
		if err != nil {
			assert.NotErrorIs(t, err, context.Canceled)
			assert.Equal(t, body, editedBody(rc), "body untouched on failure")
			assert.Empty(t, rc.Multimodal)
			return
		}
		require.True(t, valid, "accepted an invalid body")
		require.True(t, json.Valid(editedBody(rc)), "produced an invalid body: %q", editedBody(rc))
		before := fuzzImageURLs(doc)
		require.Len(t, rc.Multimodal, len(before))
		if len(before) == 0 {
			assert.Equal(t, body, editedBody(rc), "no images: body untouched")
			return
		}
		var after any
		require.NoError(t, decodeJSON(editedBody(rc), &after))
		afterURLs := fuzzImageURLs(after)
		require.Len(t, afterURLs, len(before))
		for k, e := range rc.Multimodal {
			assert.Equal(t, k, e.Index)
			assert.True(t, media.ImageType(e.ContentType), e.ContentType)
			assert.NotEmpty(t, e.Base64Data)
			if media.IsDataURI(before[k]) {
				assert.Equal(t, before[k], afterURLs[k], "data URI kept")
			} else {
				assert.Equal(t, "data:"+e.ContentType+";base64,"+e.Base64Data, afterURLs[k])
			}
		}
		fuzzSetImageURLs(doc, afterURLs)
		assert.Equal(t, doc, after, "only image URLs changed")
	})
}

func decodeJSON(data []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	return d.Decode(v)
}

// fuzzImageParts returns the image_url objects of a decoded chat body, with
// the predicate editImageParts uses.
func fuzzImageParts(doc any) []map[string]any {
	top, _ := doc.(map[string]any)
	messages, _ := top["messages"].([]any)
	var out []map[string]any
	for _, m := range messages {
		msg, _ := m.(map[string]any)
		content, _ := msg["content"].([]any)
		for _, p := range content {
			part, _ := p.(map[string]any)
			if typ, _ := part["type"].(string); typ != "image_url" {
				continue
			}
			iu, ok := part["image_url"].(map[string]any)
			if !ok {
				continue
			}
			if _, ok := iu["url"].(string); ok {
				out = append(out, iu)
			}
		}
	}
	return out
}

func fuzzImageURLs(doc any) []string {
	var urls []string
	for _, iu := range fuzzImageParts(doc) {
		urls = append(urls, iu["url"].(string))
	}
	return urls
}

func fuzzSetImageURLs(doc any, urls []string) {
	for i, iu := range fuzzImageParts(doc) {
		iu["url"] = urls[i]
	}
}
