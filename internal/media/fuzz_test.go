package media_test

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/internal/media"
)

// FuzzParseDataURI checks ParseDataURI's contract on any input; more seeds
// are in testdata/fuzz/FuzzParseDataURI. A payload is accepted exactly
// when encoding/base64's standard decoder (which also skips CR and LF,
// which vLLM's does not) takes it.
func FuzzParseDataURI(f *testing.F) {
	for _, s := range []string{
		"", "data:", "data:,", "data:image/png;base64,AAAA", "DATA:IMAGE/PNG ;BASE64,x",
		"data:;base64,", "data:image/png;base64", "data:text/html;base64,PA==",
		"data:image/png;charset=x;base64;y,A,B,C", "data:image/jpeg,base64;x", "http://x/y.png",
		"data:\x00image/gif\xff;base64,\x00", "data:image/webp;BaSe64 ,A",
		"data:image/png;base64,QUI=", "data:image/png;base64,QQ==", "data:image/png;base64,QUJD=",
		"data:image/png;base64,QU=D", "data:image/png;base64,QUJD\nQUJD", "data:image/png;base64,QR==",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, uri string) {
		mediaType, payload, err := media.ParseDataURI(uri)
		if err != nil {
			if _, rest, ok := strings.Cut(uri, ","); ok && errors.Is(err, media.ErrDataURI) && strings.Contains(err.Error(), "invalid base64") {
				_, decodeErr := base64.StdEncoding.DecodeString(rest)
				assert.True(t, decodeErr != nil || strings.ContainsAny(rest, "\r\n"), "refused payload %q decodes: %v", rest, err)
			}
			var me *media.Error
			require.ErrorAs(t, err, &me)
			assert.True(t, me.ClientFault())
			assert.True(t, errors.Is(err, media.ErrDataURI) || errors.Is(err, media.ErrNotImage), "reason: %v", err)
			assert.Empty(t, mediaType)
			assert.Empty(t, payload)
			return
		}
		assert.True(t, media.IsDataURI(uri))
		assert.True(t, media.ImageType(mediaType), "media type %q", mediaType)
		assert.NotEmpty(t, payload)
		assert.True(t, strings.HasSuffix(uri, ","+payload), "payload is everything after the first comma")
		meta, _, _ := strings.Cut(uri[len("data:"):], ",")
		assert.NotContains(t, meta, ",")
		assert.Contains(t, strings.ToLower(meta), "base64")
		_, decodeErr := base64.StdEncoding.DecodeString(payload)
		assert.True(t, decodeErr == nil && !strings.ContainsAny(payload, "\r\n"), "accepted payload %q: %v", payload, decodeErr)
	})
}
