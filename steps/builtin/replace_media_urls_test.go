package builtin_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/internal/media"
	"github.com/coordinator-project/coordinator/internal/wire/features"
	"github.com/coordinator-project/coordinator/internal/wire/legs"
	"github.com/coordinator-project/coordinator/steps/builtin"
)

func TestReplaceMediaURLsDownloadsAndInlines(t *testing.T) {
	t.Parallel()
	o := newMediaOrigin(t, serveImage("image/png; charset=binary", mediaPNG))
	body := []byte(`{"model":"m", "top_k": 5,` +
		`"messages":[{"role":"system" , "content":"be brief"},` +
		`{"role":"user","content":[{"type":"text","text":"what is this?"},` +
		`{"type":"image_url","image_url":{"url":"` + o.URL + `/cat.png","detail":"high"},"uuid":"u1"}]}],` +
		`"chat_template_kwargs":{"x":1}}`)
	rc := mediaContext(body)
	require.NoError(t, execMedia(newReplaceMedia(t, nil), rc))

	want := mediaDataURI("image/png", mediaPNG)
	assert.Equal(t, []string{want}, mediaImageURLs(t, editedBody(rc)))
	assert.Equal(t, []features.MultimodalEntry{{Index: 0, ContentType: "image/png", Base64Data: base64.StdEncoding.EncodeToString(mediaPNG)}}, rc.Multimodal)
	part := at(decoded(t, editedBody(rc)), "messages").([]any)[1].(map[string]any)["content"].([]any)[1].(map[string]any)
	assert.Equal(t, "high", at(part, "image_url", "detail"), "other image_url fields kept")
	assert.Equal(t, "u1", part["uuid"])
	// Only the edited message is re-serialised: the system message keeps its bytes.
	assert.True(t, strings.HasPrefix(string(editedBody(rc)), `{"model":"m","top_k":5,"messages":[{"role":"system" , "content":"be brief"},`), string(editedBody(rc)))
	assert.True(t, strings.HasSuffix(string(editedBody(rc)), `"chat_template_kwargs":{"x":1}}`))
	goldenJSON(t, "replace-media-urls/downloaded_body", editedBody(rc))
	goldenWire(t, "replace-media-urls/downloaded_body", editedBody(rc))
	assert.Equal(t, int32(1), o.hits.Load())
}

func TestReplaceMediaURLsNoImagesIsANoOp(t *testing.T) {
	t.Parallel()
	o := newMediaOrigin(t, serveImage("image/png", mediaPNG))
	url := o.URL + "/a.png"
	tests := []struct {
		name string
		body string
	}{
		{name: "text only", body: `{"messages":[{"role":"user","content":"hi"}]}`},
		{name: "no messages", body: `{"prompt":"hi"}`},
		{name: "messages not an array", body: `{"messages":{"0":{"content":[` + mediaImagePart(url) + `]}}}`},
		{name: "message not an object", body: `{"messages":["x",1,null,[` + mediaImagePart(url) + `]]}`},
		{name: "content a string", body: `{"messages":[{"role":"user","content":"` + url + `"}]}`},
		{name: "content parts without images", body: `{"messages":[{"content":[{"type":"text","text":"hi"}]}]}`},
		{name: "part not an object", body: `{"messages":[{"content":["image_url",null,3]}]}`},
		{name: "image_url not an object", body: `{"messages":[{"content":[{"type":"image_url","image_url":"` + url + `"}]}]}`},
		{name: "url not a string", body: `{"messages":[{"content":[{"type":"image_url","image_url":{"url":["` + url + `"]}}]}]}`},
		{name: "url missing", body: `{"messages":[{"content":[{"type":"image_url","image_url":{"detail":"low"}}]}]}`},
		{name: "type not image_url", body: `{"messages":[{"content":[{"type":"input_image","image_url":{"url":"` + url + `"}}]}]}`},
		{name: "video_url ignored", body: `{"messages":[{"content":[{"type":"video_url","video_url":{"url":"` + url + `"}}]}]}`},
		{name: "input_audio ignored", body: `{"messages":[{"content":[{"type":"input_audio","input_audio":{"data":"AAAA","format":"wav"}}]}]}`},
	}
	step := newReplaceMedia(t, nil)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rc := mediaContext([]byte(tt.body))
			require.NoError(t, execMedia(step, rc))
			assert.Equal(t, tt.body, string(editedBody(rc)), "body untouched")
			assert.Empty(t, rc.Multimodal)
		})
	}
	t.Cleanup(func() { assert.Zero(t, o.hits.Load(), "nothing downloaded") })
}

func TestReplaceMediaURLsRejectsABodyThatIsNotAnObject(t *testing.T) {
	t.Parallel()
	for _, body := range []string{``, `[]`, `{"messages":`, `null`} {
		err := execMedia(newReplaceMedia(t, nil), mediaContext([]byte(body)))
		require.ErrorIs(t, err, legs.ErrInvalidRequest, body)
	}
}

func TestReplaceMediaURLsDataURIInput(t *testing.T) {
	t.Parallel()
	uri := "data:IMAGE/JPEG ;base64,/9j/4AAQSkZJRg=="
	body := mediaChatBody(mediaImagePart(uri))
	rc := mediaContext(body)
	require.NoError(t, execMedia(newReplaceMedia(t, nil), rc))
	assert.Equal(t, string(body), string(editedBody(rc)), "data URIs are left as they are")
	assert.Equal(t, []features.MultimodalEntry{{Index: 0, ContentType: "image/jpeg", Base64Data: "/9j/4AAQSkZJRg=="}}, rc.Multimodal)
}

// Downloads finish in reverse order; entries and rewrites still follow the
// document, across messages and mixed with data URIs.
func TestReplaceMediaURLsKeepsDocumentOrder(t *testing.T) {
	t.Parallel()
	firstDone, lastDone := make(chan struct{}), make(chan struct{})
	o := newMediaOrigin(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/first.png": // held until the last one is served
			select {
			case <-lastDone:
			case <-r.Context().Done():
				return
			}
			serveImage("image/png", mediaPNG)(w, r)
			close(firstDone)
		case "/last.gif":
			serveImage("image/gif", mediaGIF)(w, r)
			close(lastDone)
		}
	})
	dataA, dataB := "data:image/webp;base64,UklGRgAA", "data:image/jpeg;base64,/9j/"
	tests := []struct {
		name  string
		parts [][]string // messages' parts
		want  []features.MultimodalEntry
	}{
		{
			name:  "http, data, http, data",
			parts: [][]string{{mediaImagePart(o.URL + "/first.png"), mediaImagePart(dataA)}, {`{"type":"text","text":"x"}`, mediaImagePart(o.URL + "/last.gif"), mediaImagePart(dataB)}},
			want: []features.MultimodalEntry{
				{Index: 0, ContentType: "image/png", Base64Data: base64.StdEncoding.EncodeToString(mediaPNG)},
				{Index: 1, ContentType: "image/webp", Base64Data: "UklGRgAA"},
				{Index: 2, ContentType: "image/gif", Base64Data: base64.StdEncoding.EncodeToString(mediaGIF)},
				{Index: 3, ContentType: "image/jpeg", Base64Data: "/9j/"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var msgs []string
			for _, p := range tt.parts {
				msgs = append(msgs, `{"role":"user","content":[`+strings.Join(p, ",")+`]}`)
			}
			rc := mediaContext([]byte(`{"messages":[` + strings.Join(msgs, ",") + `]}`))
			require.NoError(t, execMedia(newReplaceMedia(t, nil), rc))
			assert.Equal(t, tt.want, rc.Multimodal)
			var wantURLs []string
			for _, e := range tt.want {
				wantURLs = append(wantURLs, "data:"+e.ContentType+";base64,"+e.Base64Data)
			}
			assert.Equal(t, wantURLs, mediaImageURLs(t, editedBody(rc)))
			<-firstDone
		})
	}
}

func TestReplaceMediaURLsDataFirstThenHTTP(t *testing.T) {
	t.Parallel()
	o := newMediaOrigin(t, serveImage("image/gif", mediaGIF))
	rc := mediaContext(mediaChatBody(mediaImagePart("data:image/png;base64,iVBO"), mediaImagePart(o.URL+"/b.gif"), mediaImagePart("data:image/jpeg;base64,/9j/")))
	require.NoError(t, execMedia(newReplaceMedia(t, nil), rc))
	require.Len(t, rc.Multimodal, 3)
	for i, ct := range []string{"image/png", "image/gif", "image/jpeg"} {
		assert.Equal(t, i, rc.Multimodal[i].Index)
		assert.Equal(t, ct, rc.Multimodal[i].ContentType)
	}
	assert.Equal(t, []string{"data:image/png;base64,iVBO", mediaDataURI("image/gif", mediaGIF), "data:image/jpeg;base64,/9j/"}, mediaImageURLs(t, editedBody(rc)))
}

func TestReplaceMediaURLsReplacesPreviousEntries(t *testing.T) {
	t.Parallel()
	rc := mediaContext(mediaChatBody(mediaImagePart("data:image/png;base64,iVBO")))
	rc.Multimodal = []features.MultimodalEntry{{Index: 0, Hash: "stale"}, {Index: 1}}
	require.NoError(t, execMedia(newReplaceMedia(t, nil), rc))
	assert.Equal(t, []features.MultimodalEntry{{Index: 0, ContentType: "image/png", Base64Data: "iVBO"}}, rc.Multimodal)
}

func TestReplaceMediaURLsMultipleImages(t *testing.T) {
	t.Parallel()
	o := newMediaOrigin(t, serveImage("image/png", mediaPNG))
	rc := mediaContext(mediaChatBody(mediaImagePart(o.URL+"/1"), mediaImagePart(o.URL+"/2"), mediaImagePart(o.URL+"/3")))
	require.NoError(t, execMedia(newReplaceMedia(t, nil), rc))
	require.Len(t, rc.Multimodal, 3)
	assert.Equal(t, int32(3), o.hits.Load())
	for _, u := range mediaImageURLs(t, editedBody(rc)) {
		assert.Equal(t, mediaDataURI("image/png", mediaPNG), u)
	}
}

func TestReplaceMediaURLsEntryLimit(t *testing.T) {
	t.Parallel()
	o := newMediaOrigin(t, serveImage("image/png", mediaPNG))
	three := mediaChatBody(mediaImagePart(o.URL+"/1"), mediaImagePart("data:image/png;base64,AAAA"), mediaImagePart(o.URL+"/3"))
	two := mediaChatBody(mediaImagePart(o.URL+"/1"), mediaImagePart(o.URL+"/2"))

	err := execMedia(newReplaceMedia(t, map[string]any{"max_multimodal_entries": 2}), mediaContext(three))
	require.ErrorIs(t, err, legs.ErrInvalidRequest)
	assert.EqualError(t, err, "invalid request: too many multimodal entries: got 3, max 2")
	assert.Zero(t, o.hits.Load(), "refused before any download")

	rc := mediaContext(two)
	require.NoError(t, execMedia(newReplaceMedia(t, map[string]any{"max_multimodal_entries": 2}), rc), "at the limit")
	assert.Len(t, rc.Multimodal, 2)

	rc = mediaContext(three)
	require.NoError(t, execMedia(newReplaceMedia(t, map[string]any{"max_multimodal_entries": 0}), rc), "0 is unlimited")
	assert.Len(t, rc.Multimodal, 3)
}

func TestReplaceMediaURLsErrors(t *testing.T) {
	t.Parallel()
	ok := newMediaOrigin(t, serveImage("image/png", mediaPNG))
	tooLarge := func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "image/png")
		w.Header().Set("Content-Length", fmt.Sprint(1<<20+1))
		_, _ = w.Write(make([]byte, 1<<20+1))
	}
	big := newMediaOrigin(t, tooLarge)
	tests := []struct {
		name    string
		parts   []string
		params  map[string]any
		handler http.HandlerFunc // the origin serving /img
		invalid bool             // 400, else 502
		msg     string
	}{
		{name: "data URI without base64", parts: []string{mediaImagePart("data:image/png,AAAA")}, invalid: true, msg: "parsing data URI at message 0 part 0: missing base64 parameter"},
		{name: "data URI without comma", parts: []string{`{"type":"text","text":"x"}`, mediaImagePart("data:image/png;base64")}, invalid: true, msg: "parsing data URI at message 0 part 1: missing comma"},
		{name: "data URI without media type", parts: []string{mediaImagePart("data:;base64,AAAA")}, invalid: true, msg: "parsing data URI at message 0 part 0: missing media type"},
		{name: "data URI not an image", parts: []string{mediaImagePart("data:text/html;base64,PGgxPg==")}, invalid: true, msg: `parsing data URI at message 0 part 0: media type "text/html" is not an allowed image type`},
		{name: "file scheme", parts: []string{mediaImagePart("file:///etc/passwd")}, invalid: true, msg: `downloading image 0: scheme "file" is not allowed`},
		{name: "gopher scheme", parts: []string{mediaImagePart("gopher://127.0.0.1/")}, invalid: true, msg: `scheme "gopher" is not allowed`},
		{name: "invalid URL", parts: []string{mediaImagePart("http://[::1")}, invalid: true, msg: "downloading image 0: invalid URL"},
		{name: "domain not allowed", parts: []string{mediaImagePart("http://evil.test/a.png")}, params: map[string]any{"allowed_domains": []any{"images.test"}}, invalid: true, msg: `downloading image 0: domain "evil.test" is not allowed`},
		{name: "private address", parts: []string{mediaImagePart("data:image/png;base64,AAAA"), mediaImagePart("http://10.0.0.1/a.png")}, invalid: true, msg: "downloading image 1: address 10.0.0.1 is not allowed"},
		{name: "metadata address", parts: []string{mediaImagePart("http://169.254.169.254/latest/meta-data/")}, invalid: true, msg: "downloading image 0: address 169.254.169.254 is not allowed: link-local"},
		{name: "redirect to a private address", handler: func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "http://192.168.0.10/x.png", http.StatusFound)
		}, invalid: true, msg: "downloading image 0: address 192.168.0.10 is not allowed: private network"},
		{name: "not an image", handler: serveImage("text/html", []byte("<html></html>")), invalid: true, msg: `downloading image 0: content type "text/html" is not an allowed image type`},
		{name: "too large", handler: tooLarge, params: map[string]any{"max_download_size": 1}, invalid: true, msg: "downloading image 0: content length 1048577 exceeds 1048576 bytes"},
		{name: "one too large among many", parts: []string{mediaImagePart(ok.URL + "/a"), mediaImagePart(big.URL + "/b"), mediaImagePart(ok.URL + "/c")}, params: map[string]any{"max_download_size": 1}, invalid: true, msg: "downloading image 1: content length"},
		{name: "too large stream", handler: serveImage("image/png", make([]byte, 1<<20+1)), params: map[string]any{"max_download_size": 1}, invalid: true, msg: "downloading image 0: body exceeds 1048576 bytes"},
		{name: "not found", handler: func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "secret", http.StatusNotFound) }, msg: "downloading image 0: HTTP 404"},
		{name: "origin error", handler: func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "secret", http.StatusBadGateway) }, msg: "downloading image 0: HTTP 502"},
		{name: "truncated", handler: func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "image/png")
			w.Header().Set("Content-Length", "999")
			_, _ = w.Write(mediaPNG)
		}, msg: "downloading image 0: body truncated"},
		{name: "timeout", handler: func(_ http.ResponseWriter, r *http.Request) { <-r.Context().Done() }, params: map[string]any{"download_timeout": "20ms"}, msg: "downloading image 0: timed out after 20ms"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			parts := tt.parts
			if tt.handler != nil {
				o := newMediaOrigin(t, tt.handler)
				parts = append(parts, mediaImagePart(o.URL+"/img"))
			}
			body := mediaChatBody(parts...)
			rc := mediaContext(body)
			err := execMedia(newReplaceMedia(t, tt.params), rc)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.msg)
			assert.Equal(t, tt.invalid, errorsIs(err, legs.ErrInvalidRequest), "client fault: %v", err)
			assert.False(t, errorsIs(err, context.DeadlineExceeded) || errorsIs(err, context.Canceled), "a download's failure is not the request's timeout or cancellation")
			assert.NotContains(t, err.Error(), "secret")
			assert.Equal(t, string(body), string(editedBody(rc)), "body untouched on failure")
			assert.Empty(t, rc.Multimodal)
		})
	}
}

// The production policy, which no config key relaxes beyond RFC 1918:
// every URL here is refused before a connection is attempted.
func TestReplaceMediaURLsProductionPolicy(t *testing.T) {
	t.Parallel()
	o := newMediaOrigin(t, serveImage("image/png", mediaPNG))
	port := o.Listener.Addr().(interface{ AddrPort() netip.AddrPort }).AddrPort().Port()
	tests := []struct {
		url  string
		msg  string
		both bool // refused with allow_private_networks too
	}{
		{url: o.URL + "/a.png", msg: "address 127.0.0.1 is not allowed: loopback", both: true},
		{url: fmt.Sprintf("http://localhost:%d/a.png", port), msg: "is not allowed: loopback", both: true},
		{url: "http://169.254.169.254/latest/meta-data/", msg: "address 169.254.169.254 is not allowed: link-local", both: true},
		{url: "http://[::ffff:169.254.169.254]/", msg: "address 169.254.169.254 is not allowed: link-local", both: true},
		{url: "http://0.0.0.0/", msg: "address 0.0.0.0 is not allowed: unspecified", both: true},
		{url: "http://100.64.0.1/", msg: "address 100.64.0.1 is not allowed: carrier-grade NAT", both: true},
		{url: "http://[fc00::1]/", msg: "address fc00::1 is not allowed: unique local", both: true},
		{url: "http://10.0.0.1/", msg: "address 10.0.0.1 is not allowed: private network"},
		{url: "http://172.16.0.1/", msg: "address 172.16.0.1 is not allowed: private network"},
		{url: "http://192.168.1.1/", msg: "address 192.168.1.1 is not allowed: private network"},
	}
	strict, err := builtin.NewReplaceMediaURLsPlugin().New(nil)
	require.NoError(t, err)
	lax, err := builtin.NewReplaceMediaURLsPlugin().New(map[string]any{"allow_private_networks": true})
	require.NoError(t, err)
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			t.Parallel()
			err := execMedia(strict, mediaContext(mediaChatBody(mediaImagePart(tt.url))))
			require.ErrorIs(t, err, legs.ErrInvalidRequest)
			assert.Contains(t, err.Error(), "downloading image 0: ")
			assert.Contains(t, err.Error(), tt.msg)
			if tt.both {
				err := execMedia(lax, mediaContext(mediaChatBody(mediaImagePart(tt.url))))
				require.ErrorIs(t, err, legs.ErrInvalidRequest)
				assert.Contains(t, err.Error(), tt.msg)
			}
		})
	}
	t.Cleanup(func() { assert.Zero(t, o.hits.Load()) })
}

// Checks that need no network run for every image before any download.
func TestReplaceMediaURLsChecksEverythingBeforeDownloading(t *testing.T) {
	t.Parallel()
	o := newMediaOrigin(t, serveImage("image/png", mediaPNG))
	for _, bad := range []string{"data:image/png,AAAA", "ftp://127.0.0.1/a.png", "data:text/plain;base64,AAAA"} {
		err := execMedia(newReplaceMedia(t, nil), mediaContext(mediaChatBody(mediaImagePart(o.URL+"/ok.png"), mediaImagePart(bad))))
		require.ErrorIs(t, err, legs.ErrInvalidRequest, bad)
	}
	assert.Zero(t, o.hits.Load())
}

func TestReplaceMediaURLsDomainAllowlist(t *testing.T) {
	t.Parallel()
	o := newMediaOrigin(t, serveImage("image/png", mediaPNG))
	port := o.Listener.Addr().(interface{ AddrPort() netip.AddrPort }).AddrPort().Port()
	r := mediaResolver{"images.test": "127.0.0.1", "cdn.images.test": "127.0.0.1"}
	step := newReplaceMedia(t, map[string]any{"allowed_domains": []string{"Images.Test"}}, media.WithResolver(r))

	rc := mediaContext(mediaChatBody(mediaImagePart(fmt.Sprintf("http://IMAGES.test:%d/a.png", port))))
	require.NoError(t, execMedia(step, rc), "case-insensitive")
	assert.Len(t, rc.Multimodal, 1)

	err := execMedia(step, mediaContext(mediaChatBody(mediaImagePart(fmt.Sprintf("http://cdn.images.test:%d/a.png", port)))))
	require.ErrorIs(t, err, legs.ErrInvalidRequest, "exact names only")
	assert.Contains(t, err.Error(), `domain "cdn.images.test" is not allowed`)
}

// The first failure cancels the downloads still running, and Execute
// returns only when they have ended.
func TestReplaceMediaURLsFirstFailureCancelsTheRest(t *testing.T) {
	t.Parallel()
	held := make(chan struct{})
	var once sync.Once
	var cancelled int32
	var mu sync.Mutex
	o := newMediaOrigin(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/fail" {
			<-held // fail only once the other download is in flight
			http.NotFound(w, r)
			return
		}
		once.Do(func() { close(held) })
		<-r.Context().Done()
		mu.Lock()
		cancelled++
		mu.Unlock()
	})
	rc := mediaContext(mediaChatBody(mediaImagePart(o.URL+"/slow"), mediaImagePart(o.URL+"/fail")))
	err := execMedia(newReplaceMedia(t, map[string]any{"max_concurrent_downloads": 2, "download_timeout": "1m"}), rc)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "downloading image 1: HTTP 404")
	o.Close() // waits for the slow handler, which ends only if its request was cancelled
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, int32(1), cancelled)
}

// Handlers wait for a partner, so with a bound of 2 downloads run in
// pairs; none ever sees a third in flight.
func TestReplaceMediaURLsBoundsConcurrency(t *testing.T) {
	t.Parallel()
	const n, limit = 7, 2
	var (
		mu       sync.Mutex
		cond     = sync.NewCond(&mu)
		inFlight int
		started  int
		maxSeen  int
	)
	o := newMediaOrigin(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		inFlight++
		started++
		maxSeen = max(maxSeen, inFlight)
		cond.Broadcast()
		for inFlight < limit && started < n {
			cond.Wait()
		}
		mu.Unlock()
		serveImage("image/png", mediaPNG)(w, r)
		mu.Lock()
		inFlight--
		mu.Unlock()
	})
	parts := make([]string, n)
	for i := range parts {
		parts[i] = mediaImagePart(fmt.Sprintf("%s/%d.png", o.URL, i))
	}
	rc := mediaContext(mediaChatBody(parts...))
	require.NoError(t, execMedia(newReplaceMedia(t, map[string]any{"max_concurrent_downloads": limit}), rc))
	assert.Len(t, rc.Multimodal, n)
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, limit, maxSeen)
}

func TestReplaceMediaURLsCancelledContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	tests := map[string]string{
		"malformed data URI": "data:image/png,AAAA",
		"valid data URI":     "data:image/png;base64,AAAA",
		"http URL":           "http://127.0.0.1:1/a.png",
	}
	for name, url := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			err := newReplaceMedia(t, nil).Execute(ctx, mediaContext(mediaChatBody(mediaImagePart(url))))
			assert.ErrorIs(t, err, context.Canceled)
			assert.NotErrorIs(t, err, legs.ErrInvalidRequest)
		})
	}
}

func TestReplaceMediaURLsCancelledWhileDownloading(t *testing.T) {
	t.Parallel()
	started := make(chan struct{}, 3)
	o := newMediaOrigin(t, func(_ http.ResponseWriter, r *http.Request) {
		started <- struct{}{}
		<-r.Context().Done()
	})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	rc := mediaContext(mediaChatBody(mediaImagePart(o.URL+"/1"), mediaImagePart(o.URL+"/2"), mediaImagePart(o.URL+"/3")))
	step := newReplaceMedia(t, map[string]any{"max_concurrent_downloads": 2})
	go func() { errc <- step.Execute(ctx, rc) }()
	<-started
	<-started
	cancel()
	select {
	case err := <-errc:
		assert.ErrorIs(t, err, context.Canceled)
	case <-time.After(30 * time.Second):
		t.Fatal("Execute did not return after cancellation")
	}
	assert.Empty(t, rc.Multimodal)
	assert.Equal(t, int32(2), o.hits.Load(), "the third download never started")
}

type mediaResolver map[string]string

func (r mediaResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	a, ok := r[strings.ToLower(host)]
	if !ok {
		return nil, fmt.Errorf("lookup %s: no such host", host)
	}
	return []netip.Addr{netip.MustParseAddr(a)}, nil
}
