package media_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/internal/media"
	"github.com/coordinator-project/coordinator/internal/membudget"
)

// pngOf is a PNG-signed body of size bytes (at least 16), its bytes
// varying so that a misplaced chunk shows.
func pngOf(size int) []byte {
	b := make([]byte, size)
	for i := range b {
		b[i] = byte(i * 7)
	}
	copy(b, pngBytes[:16])
	return b
}

// serveSized answers with body as image/png, with a Content-Length, or
// chunked (the headers flushed before the body) when chunked is set; an
// empty Content-Type lets the client sniff.
func serveSized(ct string, body []byte, chunked bool) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header()["Content-Type"] = []string{ct}
		if ct == "" {
			w.Header()["Content-Type"] = nil
		}
		if !chunked {
			w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		} else {
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
		}
		for rest := body; len(rest) > 0; { // in odd pieces, across the reader's chunks
			n := min(len(rest), 10007)
			_, _ = w.Write(rest[:n])
			rest = rest[n:]
		}
	}
}

var dataURI = media.Framing{
	Before: func(mediaType string) string { return `"data:` + mediaType + `;base64,` },
	After:  `"`,
}

// The body is written as base64 straight into the caller's framing, at
// every size around the reader's 48 KiB chunks, sniffed or not, with a
// Content-Length or without; the account then holds exactly the image.
func TestDownloadEncodesIntoTheFraming(t *testing.T) {
	t.Parallel()
	const chunk = 48 << 10
	for _, size := range []int{16, 511, 512, chunk - 1, chunk, chunk + 1, chunk + 2, 3*chunk + 5} {
		for _, chunked := range []bool{false, true} {
			for _, ct := range []string{"image/png", ""} {
				t.Run(fmt.Sprintf("%d chunked=%t type=%q", size, chunked, ct), func(t *testing.T) {
					t.Parallel()
					body := pngOf(size)
					o := newOrigin(t, serveSized(ct, body, chunked))
					a := membudget.New(1<<30, 0).Open()
					d := newDownloader(t, config())
					img, err := d.Download(context.Background(), o.URL, media.NewQuota(0, a), dataURI)
					require.NoError(t, err)
					assert.Equal(t, "image/png", img.MediaType)
					want := `"data:image/png;base64,` + base64.StdEncoding.EncodeToString(body) + `"`
					assert.Equal(t, want, string(img.Framed))
					assert.Equal(t, base64.StdEncoding.EncodeToString(body), img.Base64)
					assert.Equal(t, int64(size), img.Size)
					assert.Equal(t, int64(len(want)), a.Held(), "the account holds the image, nothing else")
				})
			}
		}
	}
}

// A request's downloads share its quota: together they may download its
// cap, exactly, and the one that goes past fails as the client's fault;
// a body with a Content-Length is refused before it is read.
func TestDownloadTotalCap(t *testing.T) {
	t.Parallel()
	for _, chunked := range []bool{false, true} {
		t.Run("chunked="+strconv.FormatBool(chunked), func(t *testing.T) {
			t.Parallel()
			o := newOrigin(t, serveSized("image/png", pngOf(600), chunked))
			d := newDownloader(t, config())
			a := membudget.New(1<<30, 0).Open()
			q := media.NewQuota(1200, a)
			for range 2 {
				_, err := d.Download(context.Background(), o.URL, q, media.Framing{})
				require.NoError(t, err)
			}
			held := a.Held()
			_, err := d.Download(context.Background(), o.URL, q, media.Framing{})
			require.ErrorIs(t, err, media.ErrTotalTooLarge)
			var me *media.Error
			require.ErrorAs(t, err, &me)
			assert.True(t, me.ClientFault())
			assert.Equal(t, "the request's images exceed 1200 bytes in total", err.Error())
			assert.Equal(t, held, a.Held(), "the refused download holds nothing")
			assert.Equal(t, int64(1200), q.Max())
		})
	}
}

// A download the memory budget cannot serve fails with the budget's error,
// not a media one, and gives back what it drew; so does any download that
// fails after drawing.
func TestDownloadDrawsFromTheBudget(t *testing.T) {
	t.Parallel()
	body := pngOf(100 << 10)
	for _, chunked := range []bool{false, true} {
		t.Run("chunked="+strconv.FormatBool(chunked), func(t *testing.T) {
			t.Parallel()
			o := newOrigin(t, serveSized("image/png", body, chunked))
			d := newDownloader(t, config())
			b := membudget.New(64<<10, 0)
			a := b.Open()
			_, err := d.Download(context.Background(), o.URL, media.NewQuota(0, a), media.Framing{})
			require.ErrorIs(t, err, membudget.ErrExhausted)
			var me *media.Error
			assert.False(t, errors.As(err, &me), "a refusal is the budget's, not the origin's or the client's: %v", err)
			assert.Zero(t, a.Held())
			assert.Zero(t, b.InUse())

			small := newDownloader(t, media.Config{Timeout: config().Timeout, MaxSize: 80 << 10})
			a = membudget.New(1<<30, 0).Open()
			_, err = small.Download(context.Background(), o.URL, media.NewQuota(0, a), media.Framing{})
			require.ErrorIs(t, err, media.ErrTooLarge)
			assert.Zero(t, a.Held(), "a body found too large gives back its chunks")
		})
	}
}

// A body of unknown length that is not an image, by its bytes, is refused
// from its first chunk, holding nothing.
func TestDownloadSniffsTheFirstChunk(t *testing.T) {
	t.Parallel()
	o := newOrigin(t, serveSized("", bytes.Repeat([]byte("<html>"), 20000), true))
	a := membudget.New(1<<30, 0).Open()
	_, err := newDownloader(t, config()).Download(context.Background(), o.URL, media.NewQuota(0, a), media.Framing{})
	require.ErrorIs(t, err, media.ErrNotImage)
	assert.Zero(t, a.Held())
}
