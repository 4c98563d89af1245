package builtin_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/internal/media"
	"github.com/coordinator-project/coordinator/internal/wire/legs"
	"github.com/coordinator-project/coordinator/steps"
	"github.com/coordinator-project/coordinator/steps/builtin"
)

var (
	mediaPNG = append([]byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"), bytes.Repeat([]byte{7}, 16)...)
	mediaGIF = append([]byte("GIF89a"), bytes.Repeat([]byte{1}, 16)...)
)

// mediaAllowLoopback is the production address policy plus 127.0.0.0/8,
// so httptest origins can serve images: only Go code can set it.
func mediaAllowLoopback(a netip.Addr) error {
	if a.IsLoopback() {
		return nil
	}
	return media.AddressPolicy(false)(a)
}

// newReplaceMedia builds the step with params; downloads may reach
// loopback unless opts set another policy.
func newReplaceMedia(t testing.TB, params map[string]any, opts ...media.Option) steps.Step {
	t.Helper()
	opts = append([]media.Option{media.WithPolicy(mediaAllowLoopback)}, opts...)
	step, err := builtin.NewReplaceMediaURLsPluginWith(opts...).New(params)
	require.NoError(t, err)
	return step
}

// mediaOrigin is an image server on 127.0.0.1 counting its requests.
type mediaOrigin struct {
	*httptest.Server
	hits atomic.Int32
}

func newMediaOrigin(t testing.TB, h http.HandlerFunc) *mediaOrigin {
	t.Helper()
	o := &mediaOrigin{}
	o.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o.hits.Add(1)
		h(w, r)
	}))
	t.Cleanup(o.Close)
	return o
}

// serveImage answers every path with body as contentType.
func serveImage(contentType string, body []byte) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", contentType)
		_, _ = w.Write(body)
	}
}

// mediaImagePart is an image_url content part.
func mediaImagePart(url string) string {
	return fmt.Sprintf(`{"type":"image_url","image_url":{"url":%q}}`, url)
}

// mediaChatBody is a chat request whose one user message has parts.
func mediaChatBody(parts ...string) []byte {
	return []byte(`{"model":"m","messages":[{"role":"user","content":[` + strings.Join(parts, ",") + `]}]}`)
}

func mediaContext(body []byte) *steps.RequestContext {
	return &steps.RequestContext{RequestID: "req-1", Format: legs.FormatChat, Body: body}
}

func mediaDataURI(mediaType string, data []byte) string {
	return "data:" + mediaType + ";base64," + base64.StdEncoding.EncodeToString(data)
}

// mediaImageURLs lists each image part's image_url.url, in order.
func mediaImageURLs(t *testing.T, body []byte) []string {
	t.Helper()
	m := decoded(t, body)
	var urls []string
	for _, msg := range m["messages"].([]any) {
		content, ok := msg.(map[string]any)["content"].([]any)
		if !ok {
			continue
		}
		for _, p := range content {
			if iu, ok := p.(map[string]any)["image_url"].(map[string]any); ok {
				urls = append(urls, iu["url"].(string))
			}
		}
	}
	return urls
}

func execMedia(step steps.Step, rc *steps.RequestContext) error {
	return step.Execute(context.Background(), rc)
}

func errorsIs(err, target error) bool { return errors.Is(err, target) }
