package media_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/internal/media"
)

func TestDownload(t *testing.T) {
	t.Parallel()
	const limit = 1 << 20
	tests := []struct {
		name      string
		handler   http.HandlerFunc
		mediaType string // on success
		body      []byte // on success
		reason    error
		client    bool   // the fault is the client's
		msg       string // contained in the error
	}{
		{name: "png", handler: serve("image/png", pngBytes), mediaType: "image/png", body: pngBytes},
		{name: "jpeg", handler: serve("image/jpeg", jpegBytes), mediaType: "image/jpeg", body: jpegBytes},
		{name: "gif", handler: serve("image/gif", gifBytes), mediaType: "image/gif", body: gifBytes},
		{name: "webp", handler: serve("image/webp", webpBytes), mediaType: "image/webp", body: webpBytes},
		{name: "content type normalised", handler: serve("Image/PNG; charset=binary", pngBytes), mediaType: "image/png", body: pngBytes},
		{name: "malformed content type parameters", handler: serve("image/png;;=", pngBytes), mediaType: "image/png", body: pngBytes},
		{name: "header trusted over bytes", handler: serve("image/webp", pngBytes), mediaType: "image/webp", body: pngBytes},
		{name: "absent content type sniffed", handler: serve("-", pngBytes), mediaType: "image/png", body: pngBytes},
		{name: "octet-stream sniffed", handler: serve("application/octet-stream", gifBytes), mediaType: "image/gif", body: gifBytes},
		{name: "binary/octet-stream sniffed", handler: serve("binary/octet-stream", jpegBytes), mediaType: "image/jpeg", body: jpegBytes},
		{name: "octet-stream sniffed webp", handler: serve("application/octet-stream", webpBytes), mediaType: "image/webp", body: webpBytes},
		{
			name: "any 2xx accepted",
			handler: func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "image/png")
				w.WriteHeader(http.StatusNonAuthoritativeInfo)
				_, _ = w.Write(pngBytes)
			},
			mediaType: "image/png", body: pngBytes,
		},
		{
			name: "exactly at the cap",
			handler: func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "image/png")
				_, _ = w.Write(bytes.Repeat([]byte{9}, limit))
			},
			mediaType: "image/png", body: bytes.Repeat([]byte{9}, limit),
		},
		{
			name: "exactly at the cap, streamed",
			handler: func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "image/png")
				_, _ = w.Write([]byte{9})
				w.(http.Flusher).Flush() // chunked: no Content-Length
				_, _ = w.Write(bytes.Repeat([]byte{9}, limit-1))
			},
			mediaType: "image/png", body: bytes.Repeat([]byte{9}, limit),
		},
		{name: "html refused", handler: serve("text/html; charset=utf-8", []byte("<html>hi</html>")), reason: media.ErrNotImage, client: true, msg: `content type "text/html" is not an allowed image type`},
		{name: "svg refused", handler: serve("image/svg+xml", []byte("<svg/>")), reason: media.ErrNotImage, client: true, msg: `"image/svg+xml"`},
		{name: "json refused", handler: serve("application/json", []byte(`{"a":1}`)), reason: media.ErrNotImage, client: true},
		{name: "sniffed html refused", handler: serve("-", []byte("<!DOCTYPE html><html></html>")), reason: media.ErrNotImage, client: true, msg: `content sniffed as "text/html" is not an allowed image type`},
		{name: "sniffed text refused", handler: serve("application/octet-stream", []byte("just text")), reason: media.ErrNotImage, client: true, msg: `"text/plain"`},
		{
			name: "oversized by Content-Length",
			handler: func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "image/png")
				w.Header().Set("Content-Length", strconv.Itoa(limit+1))
				_, _ = w.Write(bytes.Repeat([]byte{9}, limit+1))
			},
			reason: media.ErrTooLarge, client: true, msg: "content length 1048577 exceeds 1048576 bytes",
		},
		{
			name: "oversized stream",
			handler: func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "image/png")
				_, _ = w.Write([]byte{9})
				w.(http.Flusher).Flush()
				_, _ = w.Write(bytes.Repeat([]byte{9}, limit))
			},
			reason: media.ErrTooLarge, client: true, msg: "body exceeds 1048576 bytes",
		},
		{
			name: "truncated body",
			handler: func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "image/png")
				w.Header().Set("Content-Length", "1000")
				_, _ = w.Write(pngBytes)
			},
			reason: media.ErrTruncated, msg: "body truncated",
		},
		{name: "empty body", handler: serve("image/png", nil), reason: media.ErrEmpty, msg: "empty body"},
		{
			name: "not found",
			handler: func(w http.ResponseWriter, _ *http.Request) {
				http.Error(w, "secret origin details", http.StatusNotFound)
			},
			reason: media.ErrStatus, msg: "HTTP 404",
		},
		{
			name: "server error body never quoted",
			handler: func(w http.ResponseWriter, _ *http.Request) {
				http.Error(w, "secret origin details", http.StatusInternalServerError)
			},
			reason: media.ErrStatus, msg: "HTTP 500",
		},
		{
			name: "not modified is not 2xx",
			handler: func(w http.ResponseWriter, _ *http.Request) {
				w.WriteHeader(http.StatusNotModified)
			},
			reason: media.ErrStatus, msg: "HTTP 304",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			o := newOrigin(t, tt.handler)
			d := newDownloader(t, config())
			img, err := d.Download(context.Background(), o.URL+"/img", nil, media.Framing{})
			if tt.reason == nil {
				require.NoError(t, err)
				assert.Equal(t, tt.mediaType, img.MediaType)
				assert.Equal(t, tt.body, raw(t, img))
				return
			}
			require.Error(t, err)
			assert.ErrorIs(t, err, tt.reason)
			var me *media.Error
			require.ErrorAs(t, err, &me)
			assert.Equal(t, tt.client, me.ClientFault())
			assert.Contains(t, err.Error(), tt.msg)
			assert.NotContains(t, err.Error(), "secret")
			assert.NotContains(t, err.Error(), o.URL, "errors do not quote URLs")
		})
	}
}

func TestDownloadSendsNoClientHeaders(t *testing.T) {
	t.Parallel()
	got := make(chan http.Header, 1)
	o := newOrigin(t, func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Clone()
		serve("image/png", pngBytes)(w, r)
	})
	_, err := newDownloader(t, config()).Download(context.Background(), o.URL, nil, media.Framing{})
	require.NoError(t, err)
	h := <-got
	delete(h, "User-Agent")
	assert.Empty(t, h, "only the Go client's User-Agent")
}

func TestDownloadRefusesURLsWithoutTouchingTheNetwork(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		url     string
		domains []string
		reason  error
		msg     string
	}{
		{name: "file", url: "file:///etc/passwd", reason: media.ErrScheme, msg: `scheme "file" is not allowed`},
		{name: "gopher", url: "gopher://127.0.0.1:70/", reason: media.ErrScheme, msg: `scheme "gopher" is not allowed`},
		{name: "ftp", url: "ftp://127.0.0.1/a.png", reason: media.ErrScheme, msg: `scheme "ftp" is not allowed`},
		{name: "relative", url: "/a.png", reason: media.ErrScheme, msg: `scheme "" is not allowed`},
		{name: "unparsable", url: "http://[::1", reason: media.ErrInvalidURL, msg: "invalid URL: missing ']' in host"},
		{name: "control character", url: "http://a\x7f.test/", reason: media.ErrInvalidURL, msg: "invalid URL: net/url: invalid control character in URL"},
		{name: "missing host", url: "http:///a.png", reason: media.ErrInvalidURL, msg: "invalid URL: missing host"},
		{name: "domain not listed", url: "http://evil.test/a.png", domains: []string{"images.test"}, reason: media.ErrDomainNotAllowed, msg: `domain "evil.test" is not allowed`},
		{name: "subdomain not listed", url: "http://cdn.images.test/a.png", domains: []string{"images.test"}, reason: media.ErrDomainNotAllowed},
		{name: "address literal not listed", url: "http://127.0.0.1/a.png", domains: []string{"images.test"}, reason: media.ErrDomainNotAllowed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := config()
			cfg.AllowedDomains = tt.domains
			d := newDownloader(t, cfg, media.WithResolver(newResolver(nil)))
			require.ErrorIs(t, d.Check(tt.url), tt.reason)
			_, err := d.Download(context.Background(), tt.url, nil, media.Framing{})
			require.ErrorIs(t, err, tt.reason)
			var me *media.Error
			require.ErrorAs(t, err, &me)
			assert.True(t, me.ClientFault())
			assert.Contains(t, err.Error(), tt.msg)
		})
	}
}

func TestDownloadAllowedDomains(t *testing.T) {
	t.Parallel()
	o := newOrigin(t, serve("image/png", pngBytes))
	r := newResolver(map[string][][]netip.Addr{"images.test": {addrs("127.0.0.1")}, "Images.Test": {addrs("127.0.0.1")}})
	tests := []struct {
		name    string
		domains []string
		host    string
	}{
		{name: "empty list allows all", host: "images.test"},
		{name: "listed", domains: []string{"other.test", "images.test"}, host: "images.test"},
		{name: "host case-insensitive", domains: []string{"images.test"}, host: "Images.Test"},
		{name: "list case-insensitive", domains: []string{"IMAGES.test"}, host: "images.test"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := config()
			cfg.AllowedDomains = tt.domains
			d := newDownloader(t, cfg, media.WithResolver(r))
			img, err := d.Download(context.Background(), "http://"+tt.host+":"+o.port()+"/a.png", nil, media.Framing{})
			require.NoError(t, err)
			assert.Equal(t, pngBytes, raw(t, img))
		})
	}
}

func TestDownloadDefaultPolicyRefusesLoopback(t *testing.T) {
	t.Parallel()
	o := newOrigin(t, serve("image/png", pngBytes))
	d, err := media.New(config()) // production policy, system resolver
	require.NoError(t, err)
	t.Cleanup(d.CloseIdleConnections)
	for _, host := range []string{"127.0.0.1", "localhost"} {
		_, err := d.Download(context.Background(), "http://"+host+":"+o.port()+"/a.png", nil, media.Framing{})
		require.ErrorIs(t, err, media.ErrBlockedAddress, host)
		assert.Contains(t, err.Error(), "is not allowed: loopback")
		var me *media.Error
		require.ErrorAs(t, err, &me)
		assert.True(t, me.ClientFault())
	}
	assert.Zero(t, o.hits.Load(), "nothing reached the origin")
}

func TestDownloadRefusesHostResolvingToBlockedAddress(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		answer []netip.Addr
		msg    string
	}{
		{name: "metadata", answer: addrs("169.254.169.254"), msg: "address 169.254.169.254 is not allowed: link-local"},
		{name: "private", answer: addrs("10.0.0.1"), msg: "address 10.0.0.1 is not allowed: private network"},
		{name: "v4-mapped private", answer: addrs("::ffff:192.168.1.1"), msg: "address 192.168.1.1 is not allowed: private network"},
		{name: "unique local", answer: addrs("fd00::1"), msg: "address fd00::1 is not allowed: unique local"},
		{name: "all blocked", answer: addrs("10.0.0.1", "100.64.0.1"), msg: "address 10.0.0.1 is not allowed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := newResolver(map[string][][]netip.Addr{"images.test": {tt.answer}})
			d := newDownloader(t, config(), media.WithResolver(r))
			_, err := d.Download(context.Background(), "http://images.test/a.png", nil, media.Framing{})
			require.ErrorIs(t, err, media.ErrBlockedAddress)
			assert.Contains(t, err.Error(), tt.msg)
		})
	}
}

func TestDownloadSkipsBlockedAddressesOfAHost(t *testing.T) {
	t.Parallel()
	o := newOrigin(t, serve("image/png", pngBytes))
	r := newResolver(map[string][][]netip.Addr{"images.test": {addrs("10.0.0.1", "127.0.0.1")}})
	d := newDownloader(t, config(), media.WithResolver(r))
	img, err := d.Download(context.Background(), "http://images.test:"+o.port()+"/a.png", nil, media.Framing{})
	require.NoError(t, err, "the allowed address is used, the refused one never dialled")
	assert.Equal(t, "image/png", img.MediaType)
}

// DNS rebinding: the name first answers an allowed address, then a private
// one. Only the address actually dialled counts, so the second download is
// refused at dial time.
func TestDownloadDNSRebindingRefusedAtDial(t *testing.T) {
	t.Parallel()
	o := newOrigin(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close") // make the next download dial again
		serve("image/png", pngBytes)(w, r)
	})
	// In this test 127.0.0.1 stands for a public address.
	r := newResolver(map[string][][]netip.Addr{"rebind.test": {addrs("127.0.0.1"), addrs("10.0.0.1")}})
	d := newDownloader(t, config(), media.WithResolver(r))
	url := "http://rebind.test:" + o.port() + "/a.png"

	_, err := d.Download(context.Background(), url, nil, media.Framing{})
	require.NoError(t, err, "first answer: allowed")
	_, err = d.Download(context.Background(), url, nil, media.Framing{})
	require.ErrorIs(t, err, media.ErrBlockedAddress, "second answer: private, refused at dial")
	assert.Contains(t, err.Error(), "address 10.0.0.1 is not allowed")
	assert.Equal(t, 2, r.Calls("rebind.test"))
	assert.Equal(t, int32(1), o.hits.Load())
}

func TestDownloadRedirects(t *testing.T) {
	t.Parallel()
	target := newOrigin(t, serve("image/png", pngBytes))
	r := newResolver(map[string][][]netip.Addr{
		"images.test":   {addrs("127.0.0.1")},
		"cdn.test":      {addrs("127.0.0.1")},
		"internal.test": {addrs("10.0.0.7")},
	})
	tests := []struct {
		name     string
		location string
		domains  []string
		reason   error
		msg      string
	}{
		{name: "to an allowed origin", location: target.URL + "/a.png"},
		{name: "to an allowed domain", location: "http://cdn.test:" + target.port() + "/a.png", domains: []string{"images.test", "cdn.test"}},
		{name: "to a private address", location: "http://10.0.0.1/a.png", reason: media.ErrBlockedAddress, msg: "address 10.0.0.1 is not allowed: private network"},
		{name: "to the metadata address", location: "http://169.254.169.254/latest/meta-data/", reason: media.ErrBlockedAddress, msg: "address 169.254.169.254 is not allowed: link-local"},
		{name: "to a name resolving to a private address", location: "http://internal.test/a.png", reason: media.ErrBlockedAddress, msg: "address 10.0.0.7 is not allowed"},
		{name: "to a domain not allowed", location: "http://cdn.test:" + target.port() + "/a.png", domains: []string{"images.test"}, reason: media.ErrDomainNotAllowed, msg: `domain "cdn.test" is not allowed`},
		{name: "to a file URL", location: "file:///etc/passwd", reason: media.ErrScheme, msg: `scheme "file" is not allowed`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			start := newOrigin(t, func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, tt.location, http.StatusFound)
			})
			cfg := config()
			cfg.AllowedDomains = tt.domains
			d := newDownloader(t, cfg, media.WithResolver(r))
			img, err := d.Download(context.Background(), "http://images.test:"+start.port()+"/start", nil, media.Framing{})
			if tt.reason == nil {
				require.NoError(t, err)
				assert.Equal(t, pngBytes, raw(t, img))
				return
			}
			require.ErrorIs(t, err, tt.reason)
			var me *media.Error
			require.ErrorAs(t, err, &me)
			assert.True(t, me.ClientFault())
			assert.Contains(t, err.Error(), tt.msg)
		})
	}
}

func TestDownloadRedirectLimit(t *testing.T) {
	t.Parallel()
	// /hop/N redirects to /hop/N-1; /hop/0 serves the image.
	var o *origin
	o = newOrigin(t, func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Path[len("/hop/"):])
		if n == 0 {
			serve("image/png", pngBytes)(w, r)
			return
		}
		http.Redirect(w, r, fmt.Sprintf("%s/hop/%d", o.URL, n-1), http.StatusMovedPermanently)
	})
	d := newDownloader(t, config())

	_, err := d.Download(context.Background(), o.URL+"/hop/10", nil, media.Framing{})
	require.NoError(t, err, "10 redirects are followed")

	_, err = d.Download(context.Background(), o.URL+"/hop/11", nil, media.Framing{})
	require.ErrorIs(t, err, media.ErrTooManyRedirects)
	var me *media.Error
	require.ErrorAs(t, err, &me)
	assert.True(t, me.ClientFault())
	assert.EqualError(t, err, "more than 10 redirects")
}

func TestDownloadRedirectDropsReferer(t *testing.T) {
	t.Parallel()
	got := make(chan http.Header, 1)
	target := newOrigin(t, func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Clone()
		serve("image/png", pngBytes)(w, r)
	})
	start := newOrigin(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL+"/a.png", http.StatusFound)
	})
	_, err := newDownloader(t, config()).Download(context.Background(), start.URL+"/a.png?token=secret", nil, media.Framing{})
	require.NoError(t, err)
	assert.Empty(t, (<-got).Get("Referer"))
}

func TestDownloadHTTPS(t *testing.T) {
	t.Parallel()
	tlsOrigin := httptestTLS(t, serve("image/jpeg", jpegBytes))
	start := newOrigin(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, tlsOrigin.URL+"/a.jpg", http.StatusFound)
	})
	d := newDownloader(t, config(), media.WithTLSConfig(tlsOrigin.Client().Transport.(*http.Transport).TLSClientConfig))
	for _, url := range []string{tlsOrigin.URL + "/a.jpg", start.URL} {
		img, err := d.Download(context.Background(), url, nil, media.Framing{})
		require.NoError(t, err, url)
		assert.Equal(t, "image/jpeg", img.MediaType)
	}
}

func TestDownloadUnreachable(t *testing.T) {
	t.Parallel()
	o := newOrigin(t, serve("image/png", pngBytes))
	url := o.URL
	o.Close()
	_, err := newDownloader(t, config()).Download(context.Background(), url, nil, media.Framing{})
	require.ErrorIs(t, err, media.ErrUnreachable)
	var me *media.Error
	require.ErrorAs(t, err, &me)
	assert.False(t, me.ClientFault())
	assert.Contains(t, err.Error(), "connection refused")

	_, err = newDownloader(t, config(), media.WithResolver(newResolver(nil))).Download(context.Background(), "http://nowhere.test/a.png", nil, media.Framing{})
	require.ErrorIs(t, err, media.ErrUnreachable)
	assert.Contains(t, err.Error(), "no such host")
}

func TestDownloadTimeout(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		handler http.HandlerFunc
	}{
		{
			name: "no headers",
			handler: func(_ http.ResponseWriter, r *http.Request) {
				<-r.Context().Done()
			},
		},
		{
			name: "stalled body",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "image/png")
				w.Header().Set("Content-Length", "1000")
				_, _ = w.Write(pngBytes)
				w.(http.Flusher).Flush()
				<-r.Context().Done()
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			o := newOrigin(t, tt.handler)
			cfg := config()
			cfg.Timeout = 50 * time.Millisecond
			_, err := newDownloader(t, cfg).Download(context.Background(), o.URL, nil, media.Framing{})
			require.ErrorIs(t, err, media.ErrTimeout)
			assert.NotErrorIs(t, err, context.DeadlineExceeded, "a download timeout is the origin's fault (502), not the request's deadline")
			var me *media.Error
			require.ErrorAs(t, err, &me)
			assert.False(t, me.ClientFault())
			assert.EqualError(t, err, "timed out after 50ms")
		})
	}
}

func TestDownloadCancelled(t *testing.T) {
	t.Parallel()
	started := make(chan struct{})
	o := newOrigin(t, func(w http.ResponseWriter, r *http.Request) {
		close(started)
		<-r.Context().Done()
	})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	d := newDownloader(t, config())
	go func() {
		_, err := d.Download(ctx, o.URL, nil, media.Framing{})
		errc <- err
	}()
	<-started
	cancel()
	err := <-errc
	assert.ErrorIs(t, err, context.Canceled)
	var me *media.Error
	assert.NotErrorAs(t, err, &me, "cancellation is nobody's fault")

	_, err = d.Download(ctx, o.URL, nil, media.Framing{})
	assert.ErrorIs(t, err, context.Canceled, "already cancelled")
}

func TestNewValidatesConfig(t *testing.T) {
	t.Parallel()
	_, err := media.New(media.Config{Timeout: 0, MaxSize: 1})
	require.EqualError(t, err, "media: timeout must be positive, got 0s")
	_, err = media.New(media.Config{Timeout: time.Second, MaxSize: 0})
	require.ErrorContains(t, err, "media: max size must be in [1, 9223372036854775806], got 0")
}
