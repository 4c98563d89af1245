package media_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/internal/media"
)

// Image bodies DetectContentType recognises.
var (
	pngBytes  = append([]byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"), bytes.Repeat([]byte{7}, 64)...)
	gifBytes  = append([]byte("GIF89a"), bytes.Repeat([]byte{1}, 32)...)
	jpegBytes = append([]byte("\xff\xd8\xff\xe0"), bytes.Repeat([]byte{2}, 32)...)
	webpBytes = append([]byte("RIFF\x00\x00\x00\x00WEBPVP8 "), bytes.Repeat([]byte{3}, 32)...)
)

// allowLoopback is the production policy plus 127.0.0.0/8, for httptest
// origins: something only Go code can configure.
func allowLoopback(a netip.Addr) error {
	if a.IsLoopback() {
		return nil
	}
	return media.AddressPolicy(false)(a)
}

// origin is an httptest server on 127.0.0.1 counting the requests it gets.
type origin struct {
	*httptest.Server
	hits atomic.Int32
}

func newOrigin(t *testing.T, h http.HandlerFunc) *origin {
	t.Helper()
	o := &origin{}
	o.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o.hits.Add(1)
		h(w, r)
	}))
	t.Cleanup(o.Close)
	return o
}

// serve answers with a fixed content type (none when ct is "-") and body.
func serve(ct string, body []byte) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		if ct == "-" {
			w.Header()["Content-Type"] = nil // stop net/http from sniffing one
		} else {
			w.Header().Set("Content-Type", ct)
		}
		_, _ = w.Write(body)
	}
}

func config() media.Config {
	return media.Config{Timeout: 10 * time.Second, MaxSize: 1 << 20}
}

// newDownloader builds a Downloader that may reach loopback unless opts
// override the policy.
func newDownloader(t *testing.T, cfg media.Config, opts ...media.Option) *media.Downloader {
	t.Helper()
	d, err := media.New(cfg, append([]media.Option{media.WithPolicy(allowLoopback)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(d.CloseIdleConnections)
	return d
}

// resolver answers from a table; a host's answers are used in turn and
// the last one repeats. It counts lookups.
type resolver struct {
	mu      sync.Mutex
	answers map[string][][]netip.Addr
	calls   map[string]int
}

func newResolver(answers map[string][][]netip.Addr) *resolver {
	return &resolver{answers: answers, calls: map[string]int{}}
}

func (r *resolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	list, ok := r.answers[host]
	if !ok {
		return nil, fmt.Errorf("lookup %s: no such host", host)
	}
	i := min(r.calls[host], len(list)-1)
	r.calls[host]++
	return list[i], nil
}

func (r *resolver) Calls(host string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls[host]
}

func addrs(s ...string) []netip.Addr {
	out := make([]netip.Addr, len(s))
	for i, a := range s {
		out[i] = netip.MustParseAddr(a)
	}
	return out
}

// port is the origin's port, to build URLs with host names.
func (o *origin) port() string {
	return fmt.Sprint(o.Listener.Addr().(interface{ AddrPort() netip.AddrPort }).AddrPort().Port())
}

func httptestTLS(t *testing.T, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	s := httptest.NewTLSServer(h)
	t.Cleanup(s.Close)
	return s
}

// raw is img's body, decoded from its base64, after checking that the
// base64 fills img.Framed (downloaded with no framing).
func raw(t *testing.T, img media.Image) []byte {
	t.Helper()
	require.Equal(t, img.Base64, string(img.Framed))
	data, err := base64.StdEncoding.DecodeString(img.Base64)
	require.NoError(t, err)
	require.Len(t, data, int(img.Size))
	return data
}
