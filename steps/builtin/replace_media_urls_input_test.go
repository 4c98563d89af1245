package builtin_test

import (
	"context"
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/internal/media"
	"github.com/coordinator-project/coordinator/internal/wire/legs"
	"github.com/coordinator-project/coordinator/steps"
	"github.com/coordinator-project/coordinator/steps/builtin"
)

// nxdomain answers every lookup as DNS does for a name that does not exist.
type nxdomain struct{}

func (nxdomain) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// An image URL whose host is not an address or does not resolve is the
// client's: invalid request (400) naming the image, its part and the host,
// and no download is tried. With the production step (system resolver,
// production policy): the numeric forms and .invalid names are refused
// before any lookup, so nothing here depends on the machine's DNS.
func TestReplaceMediaURLsHostsThatDoNotResolve(t *testing.T) {
	t.Parallel()
	production, err := builtin.NewReplaceMediaURLsPlugin().New(nil)
	require.NoError(t, err)
	withNXDOMAIN, err := builtin.NewReplaceMediaURLsPluginWith(media.WithResolver(nxdomain{})).New(nil)
	require.NoError(t, err)
	const at = " (in messages[0].content[1].image_url.url)"
	const notIPv4 = ` is not valid: an IPv4 address is four decimal numbers (a.b.c.d)`
	tests := []struct {
		url  string
		step steps.Step
		msg  string
	}{
		{url: "http://127.1/a.png", step: production, msg: `downloading image 0: host "127.1"` + notIPv4 + at},
		{url: "http://0x7f000001/a.png", step: production, msg: `downloading image 0: host "0x7f000001"` + notIPv4 + at},
		{url: "http://017700000001/a.png", step: production, msg: `downloading image 0: host "017700000001"` + notIPv4 + at},
		{url: "http://nonexistent.invalid/a.png", step: production, msg: `downloading image 0: host "nonexistent.invalid" does not resolve` + at},
		{url: "http://no-such-name.test/a.png", step: withNXDOMAIN, msg: `downloading image 0: host "no-such-name.test" does not resolve` + at},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			t.Parallel()
			rc := mediaContext(mediaChatBody(`{"type":"text","text":"look"}`, mediaImagePart(tt.url)))
			err := execMedia(tt.step, rc)
			require.ErrorIs(t, err, legs.ErrInvalidRequest)
			assert.Equal(t, "invalid request: "+tt.msg, err.Error())
		})
	}
}

// A data URI whose payload is not base64 as vLLM decodes it is refused,
// naming the part and the offset in the URL of the first bad byte.
func TestReplaceMediaURLsInvalidBase64(t *testing.T) {
	t.Parallel()
	huge := "data:image/png;base64," + strings.Repeat("*", 40<<20)
	tests := []struct{ url, msg string }{
		{url: "data:image/png;base64,!!!", msg: `parsing data URI at message 0 part 1: invalid base64 at offset 22: "!" is not in the base64 alphabet (A-Z a-z 0-9 + /) (in messages[0].content[1].image_url.url)`},
		{url: huge, msg: `parsing data URI at message 0 part 1: invalid base64 at offset 22: "*" is not in the base64 alphabet (A-Z a-z 0-9 + /) (in messages[0].content[1].image_url.url)`},
		{url: "data:image/png;base64,QUJDQQ", msg: "parsing data URI at message 0 part 1: invalid base64 at offset 28: length 6 is not a multiple of 4 (padding missing?) (in messages[0].content[1].image_url.url)"},
	}
	for _, tt := range tests {
		rc := mediaContext(mediaChatBody(`{"type":"text","text":"look"}`, mediaImagePart(tt.url)))
		err := execMedia(newReplaceMedia(t, nil), rc)
		require.ErrorIs(t, err, legs.ErrInvalidRequest)
		assert.Equal(t, "invalid request: "+tt.msg, err.Error())
		assert.Empty(t, rc.Multimodal)
	}
}

// Without max_multimodal_entries a request may carry
// steps.DefaultMaxMultimodalEntries images (64), one more is refused
// before any download; 0 lifts the bound.
func TestReplaceMediaURLsDefaultEntryLimit(t *testing.T) {
	t.Parallel()
	require.Equal(t, 64, builtin.DefaultMaxMultimodalEntries)
	o := newMediaOrigin(t, serveImage("image/png", mediaPNG))
	parts := func(n int) []string {
		p := make([]string, n)
		for i := range p {
			p[i] = mediaImagePart("data:image/png;base64,AAAA")
		}
		return append(p, mediaImagePart(o.URL+"/last.png"))
	}
	rc := mediaContext(mediaChatBody(parts(builtin.DefaultMaxMultimodalEntries - 1)...))
	require.NoError(t, execMedia(newReplaceMedia(t, nil), rc), "at the default")
	assert.Len(t, rc.Multimodal, builtin.DefaultMaxMultimodalEntries)
	require.Equal(t, int32(1), o.hits.Load())

	err := execMedia(newReplaceMedia(t, nil), mediaContext(mediaChatBody(parts(builtin.DefaultMaxMultimodalEntries)...)))
	require.ErrorIs(t, err, legs.ErrInvalidRequest)
	assert.EqualError(t, err, "invalid request: too many multimodal entries: got 65, max 64")
	assert.Equal(t, int32(1), o.hits.Load(), "refused before any download")

	rc = mediaContext(mediaChatBody(parts(1000)...))
	require.NoError(t, execMedia(newReplaceMedia(t, map[string]any{"max_multimodal_entries": 0}), rc), "0 is unlimited")
	assert.Len(t, rc.Multimodal, 1001)
}
