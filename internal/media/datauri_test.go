package media_test

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/internal/media"
)

func TestParseDataURI(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		uri       string
		mediaType string
		payload   string
		reason    error
		msg       string
	}{
		{name: "jpeg", uri: "data:image/jpeg;base64,/9j/4AAQ", mediaType: "image/jpeg", payload: "/9j/4AAQ"},
		{name: "png", uri: "data:image/png;base64,iVBORw0KGgo=", mediaType: "image/png", payload: "iVBORw0KGgo="},
		{name: "gif", uri: "data:image/gif;base64,R0lGODlh", mediaType: "image/gif", payload: "R0lGODlh"},
		{name: "webp", uri: "data:image/webp;base64,UklGRg==", mediaType: "image/webp", payload: "UklGRg=="},
		{name: "media type normalised", uri: "data:IMAGE/PNG ;base64,AAAA", mediaType: "image/png", payload: "AAAA"},
		{name: "scheme is case-insensitive", uri: "DATA:image/png;base64,AAAA", mediaType: "image/png", payload: "AAAA"},
		{name: "base64 among parameters, any case", uri: "data:image/png;name=a.png; BASE64 ;x=y,AAAA", mediaType: "image/png", payload: "AAAA"},
		{name: "payload validated, not decoded", uri: "data:image/png;base64,not base64!,with,commas", reason: media.ErrDataURI,
			msg: `invalid base64 at offset 25: " " is not in the base64 alphabet (A-Z a-z 0-9 + /)`},
		{name: "empty media type", uri: "data:;base64,AAAA", reason: media.ErrDataURI, msg: "missing media type"},
		{name: "blank media type", uri: "data: ;base64,AAAA", reason: media.ErrDataURI, msg: "missing media type"},
		{name: "missing comma", uri: "data:image/png;base64", reason: media.ErrDataURI, msg: "missing comma"},
		{name: "missing base64", uri: "data:image/png,AAAA", reason: media.ErrDataURI, msg: "missing base64 parameter"},
		{name: "base64 as media type is not a parameter", uri: "data:base64,AAAA", reason: media.ErrDataURI, msg: "missing base64 parameter"},
		{name: "base64 only after the comma", uri: "data:image/png,;base64", reason: media.ErrDataURI, msg: "missing base64 parameter"},
		{name: "empty payload", uri: "data:image/png;base64,", reason: media.ErrDataURI, msg: "empty payload"},
		{name: "not an image", uri: "data:text/html;base64,PGgxPg==", reason: media.ErrNotImage, msg: `media type "text/html" is not an allowed image type`},
		{name: "svg refused", uri: "data:image/svg+xml;base64,PHN2Zz4=", reason: media.ErrNotImage, msg: `media type "image/svg+xml" is not an allowed image type`},
		{name: "not a data URI", uri: "http://example.com/a.png", reason: media.ErrDataURI, msg: "not a data URI"},
		{name: "empty", uri: "", reason: media.ErrDataURI, msg: "not a data URI"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			mediaType, payload, err := media.ParseDataURI(tt.uri)
			if tt.reason != nil {
				require.Error(t, err)
				assert.ErrorIs(t, err, tt.reason)
				assert.EqualError(t, err, tt.msg)
				var me *media.Error
				require.ErrorAs(t, err, &me)
				assert.True(t, me.ClientFault())
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.mediaType, mediaType)
			assert.Equal(t, tt.payload, payload)
		})
	}
}

// The payload must be what vLLM's decoder takes (pybase64.b64decode with
// validate=True): the standard alphabet, whole 4-character groups, '='
// only to pad the last one; no whitespace, no URL-safe alphabet, no
// percent-encoding. Offsets count from the start of the URI.
func TestParseDataURIValidatesBase64(t *testing.T) {
	t.Parallel()
	const prefix = "data:image/png;base64," // 22 bytes
	tests := []struct {
		name, payload string
		msg           string // "" when accepted
	}{
		{name: "no padding", payload: "QUJD"},
		{name: "one pad", payload: "QUI="},
		{name: "two pads", payload: "QQ=="},
		{name: "nonzero trailing bits, as Python takes", payload: "QR=="},
		{name: "every character", payload: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"},
		{name: "bangs", payload: "!!!", msg: `invalid base64 at offset 22: "!" is not in the base64 alphabet (A-Z a-z 0-9 + /)`},
		{name: "a bad byte late", payload: "QUJDQUJD\x00QUI", msg: `invalid base64 at offset 30: "\x00" is not in the base64 alphabet (A-Z a-z 0-9 + /)`},
		{name: "non-ASCII", payload: "QUJD\u00e9", msg: `invalid base64 at offset 26: "\xc3" is not in the base64 alphabet (A-Z a-z 0-9 + /)`},
		{name: "URL-safe alphabet", payload: "QU-_", msg: `invalid base64 at offset 24: "-" is not in the base64 alphabet (A-Z a-z 0-9 + /)`},
		{name: "percent-encoded", payload: "QUJD%3D", msg: `invalid base64 at offset 26: "%" is not in the base64 alphabet (A-Z a-z 0-9 + /)`},
		{name: "a newline", payload: "QUJD\nQUJD", msg: `invalid base64 at offset 26: "\n" is not in the base64 alphabet (A-Z a-z 0-9 + /)`},
		{name: "a space", payload: "QUJD QUJD", msg: `invalid base64 at offset 26: " " is not in the base64 alphabet (A-Z a-z 0-9 + /)`},
		{name: "unpadded", payload: "QQ", msg: "invalid base64 at offset 24: length 2 is not a multiple of 4 (padding missing?)"},
		{name: "three left over", payload: "QUJDQUI", msg: "invalid base64 at offset 29: length 7 is not a multiple of 4 (padding missing?)"},
		{name: "excess padding", payload: "QUJD=", msg: "invalid base64 at offset 26: misplaced padding '='"},
		{name: "three pads", payload: "Q===", msg: "invalid base64 at offset 23: misplaced padding '='"},
		{name: "all pads", payload: "====", msg: "invalid base64 at offset 22: misplaced padding '='"},
		{name: "padding mid-way", payload: "QQ==QUJD", msg: "invalid base64 at offset 24: misplaced padding '='"},
		{name: "data after padding", payload: "QU=D", msg: "invalid base64 at offset 25: data after padding '='"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			mediaType, payload, err := media.ParseDataURI(prefix + tt.payload)
			if tt.msg == "" {
				require.NoError(t, err)
				assert.Equal(t, "image/png", mediaType)
				assert.Equal(t, tt.payload, payload)
				return
			}
			require.ErrorIs(t, err, media.ErrDataURI)
			assert.EqualError(t, err, tt.msg)
		})
	}
}

// A 40 MB run of invalid characters is refused at its first byte, with
// no allocation but the error's (AllocsPerRun: not parallel).
func TestParseDataURIStopsAtTheFirstBadByte(t *testing.T) {
	bad := "data:image/png;base64," + strings.Repeat("!", 40<<20)
	_, _, err := media.ParseDataURI(bad)
	require.ErrorIs(t, err, media.ErrDataURI)
	assert.EqualError(t, err, `invalid base64 at offset 22: "!" is not in the base64 alphabet (A-Z a-z 0-9 + /)`)
	// The error's few small allocations, nothing proportional to the 40 MB
	// payload. Bytes, not a count: under -race sync.Pool (fmt's printers)
	// drops items at random, so the count varies by one or two.
	assert.Less(t, bytesPerRun(10, func() { _, _, _ = media.ParseDataURI(bad) }), uint64(4<<10))

	good := "data:image/png;base64," + strings.Repeat("QUJD", 10<<20)
	allocs := testing.AllocsPerRun(10, func() { _, _, _ = media.ParseDataURI(good) })
	assert.Zero(t, allocs, "a valid payload is checked in place")
}

// bytesPerRun is the heap bytes f allocates per call, averaged over runs.
func bytesPerRun(runs int, f func()) uint64 {
	f() // warm up
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range runs {
		f()
	}
	runtime.ReadMemStats(&after)
	return (after.TotalAlloc - before.TotalAlloc) / uint64(runs)
}

// BenchmarkParseDataURI measures the base64 check on a 1 MB and a 16 MB
// payload: bytes/s and allocations.
func BenchmarkParseDataURI(b *testing.B) {
	for _, size := range []int{1 << 20, 16 << 20} {
		uri := "data:image/png;base64," + strings.Repeat("QUJD", size/4)
		b.Run(fmt.Sprintf("%dMB", size>>20), func(b *testing.B) {
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := media.ParseDataURI(uri); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func TestIsDataURI(t *testing.T) {
	t.Parallel()
	assert.True(t, media.IsDataURI("data:x"))
	assert.True(t, media.IsDataURI("Data:"))
	assert.False(t, media.IsDataURI("data"))
	assert.False(t, media.IsDataURI(" data:x"))
	assert.False(t, media.IsDataURI("https://x/data:"))
}
