// Package media fetches the images a chat request points at, safely: a
// Downloader that refuses to reach private, loopback or metadata addresses
// (checked on the address actually dialled, so DNS rebinding and redirects
// cannot get around it), caps size, time and redirects, and accepts only
// image types, and hands each image over as the base64 inside the caller's
// framing, written as the body arrives (the image is held once); a Quota
// caps what one request's downloads take together and draws their memory
// from its budget account; and ParseDataURI for images already inlined.
// It knows nothing of pipelines or request bodies.
package media

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/coordinator-project/coordinator/internal/membudget"
)

// MaxRedirects is how many redirects one download follows (decision D14).
const MaxRedirects = 10

// Config is what an operator sets.
type Config struct {
	// Timeout bounds a whole download: dial, redirects, headers and body.
	Timeout time.Duration
	// MaxSize is the largest body accepted, in bytes; exactly MaxSize is
	// accepted.
	MaxSize int64
	// AllowPrivateNetworks lets the default policy reach RFC 1918 addresses.
	AllowPrivateNetworks bool
	// AllowedDomains, when not empty, lists the only host names (compared
	// case-insensitively, exactly: no subdomains) a download and each of its
	// redirects may go to.
	AllowedDomains []string
}

// Option changes a Downloader in ways only Go code can: tests serve images
// from 127.0.0.1, which no config setting can allow.
type Option func(*options)

type options struct {
	policy   Policy
	resolver Resolver
	tls      *tls.Config
}

// WithPolicy replaces the address policy (by default
// AddressPolicy(cfg.AllowPrivateNetworks)).
func WithPolicy(p Policy) Option { return func(o *options) { o.policy = p } }

// WithResolver replaces the resolver (by default net.DefaultResolver).
func WithResolver(r Resolver) Option { return func(o *options) { o.resolver = r } }

// WithTLSConfig sets the TLS client config, e.g. to trust a test server.
func WithTLSConfig(c *tls.Config) Option { return func(o *options) { o.tls = c } }

// Downloader fetches images over HTTP(S). It is safe for concurrent use.
//
// Every connection, redirect hops included, goes through the address
// policy. The environment's HTTP(S)_PROXY is deliberately ignored (the
// reference honours it, and then its guard vets the proxy's address
// instead of the origin's, which switches the guard off): downloads always
// connect to the origin directly.
type Downloader struct {
	timeout time.Duration
	maxSize int64
	domains map[string]bool
	client  *http.Client
	// transport is the client's, kept for CloseIdleConnections.
	transport *http.Transport
}

// New builds a Downloader. It starts nothing.
func New(cfg Config, opts ...Option) (*Downloader, error) {
	switch {
	case cfg.Timeout <= 0:
		return nil, fmt.Errorf("media: timeout must be positive, got %s", cfg.Timeout)
	case cfg.MaxSize <= 0 || cfg.MaxSize == math.MaxInt64:
		return nil, fmt.Errorf("media: max size must be in [1, %d], got %d", int64(math.MaxInt64-1), cfg.MaxSize)
	}
	o := options{policy: AddressPolicy(cfg.AllowPrivateNetworks), resolver: net.DefaultResolver}
	for _, opt := range opts {
		opt(&o)
	}
	d := &Downloader{timeout: cfg.Timeout, maxSize: cfg.MaxSize}
	for _, domain := range cfg.AllowedDomains {
		if d.domains == nil {
			d.domains = make(map[string]bool, len(cfg.AllowedDomains))
		}
		d.domains[strings.ToLower(domain)] = true
	}
	d.transport = &http.Transport{
		Proxy:                  nil, // see the type's doc
		DialContext:            newGuardedDialer(o.resolver, o.policy).DialContext,
		TLSClientConfig:        o.tls,
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           100,
		IdleConnTimeout:        90 * time.Second,
		TLSHandshakeTimeout:    10 * time.Second,
		ExpectContinueTimeout:  time.Second,
		MaxResponseHeaderBytes: 64 << 10,
		// Images are compressed already; and a transparently gunzipped
		// body would hide the origin's Content-Length.
		DisableCompression: true,
	}
	d.client = &http.Client{Transport: d.transport, CheckRedirect: d.checkRedirect}
	return d, nil
}

// CloseIdleConnections closes the kept-alive connections no download uses.
func (d *Downloader) CloseIdleConnections() { d.transport.CloseIdleConnections() }

// Check vets rawURL without touching the network: it must parse as an
// absolute http or https URL with a host that is a name or an IP address
// written as netip writes it (checkHost), not a name under .invalid, and
// an allowed domain. Download runs it too; callers use it to refuse a request before
// starting any download.
func (d *Downloader) Check(rawURL string) error {
	_, err := d.check(rawURL)
	return err
}

func (d *Downloader) check(rawURL string) (*url.URL, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // without the URL, which may carry credentials
		}
		return nil, newError(ErrInvalidURL, "invalid URL: %v", err)
	}
	if err := d.checkURL(u); err != nil {
		return nil, err
	}
	return u, nil
}

// checkURL vets a parsed URL: the request's or a redirect's.
func (d *Downloader) checkURL(u *url.URL) error {
	if u.Scheme != "http" && u.Scheme != "https" {
		return newError(ErrScheme, "scheme %q is not allowed", truncate(u.Scheme))
	}
	host := u.Hostname()
	if host == "" {
		return newError(ErrInvalidURL, "invalid URL: missing host")
	}
	if err := checkHost(host); err != nil {
		return err
	}
	if len(d.domains) > 0 && !d.domains[strings.ToLower(host)] {
		return newError(ErrDomainNotAllowed, "domain %q is not allowed", truncate(host))
	}
	return nil
}

func (d *Downloader) checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) > MaxRedirects {
		return newError(ErrTooManyRedirects, "more than %d redirects", MaxRedirects)
	}
	if err := d.checkURL(req.URL); err != nil {
		return err
	}
	// The client adds a Referer on redirects: it would hand the image URL
	// (and any token in it) to the next host.
	req.Header.Del("Referer")
	return nil
}

// Download GETs rawURL, with no headers of the client's, following at most
// MaxRedirects redirects, each vetted like rawURL, and returns the body
// base64-encoded inside framing f (see read: the body is held once, as
// its base64). The whole download gets Config.Timeout. Any 2xx answer is
// accepted. A Content-Length or body over Config.MaxSize is refused, as is
// a media type outside the image allowlist: the Content-Type header's, or
// when that is absent or generic (application/octet-stream,
// binary/octet-stream) the type sniffed from the body. The body counts
// against q's cap, shared with the request's other downloads, and its
// memory is drawn from q's account (q may be nil).
//
// Errors are *Error, except when ctx itself ends (then Download returns
// ctx.Err(), since neither the client's URL nor the origin is at fault)
// and when the memory budget refuses (an error wrapping
// membudget.ErrExhausted).
func (d *Downloader) Download(ctx context.Context, rawURL string, q *Quota, f Framing) (Image, error) {
	u, err := d.check(rawURL)
	if err != nil {
		return Image{}, err
	}
	dctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	img, err := d.fetch(dctx, u, q, f)
	if err == nil {
		return img, nil
	}
	if ctx.Err() != nil {
		return Image{}, ctx.Err()
	}
	var me *Error
	switch {
	case errors.As(err, &me):
		return Image{}, me
	case errors.Is(err, membudget.ErrExhausted):
		return Image{}, err
	case dctx.Err() != nil:
		return Image{}, newError(ErrTimeout, "timed out after %s", d.timeout)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return Image{}, newError(ErrTruncated, "body truncated")
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err // without the URL
	}
	return Image{}, newError(ErrUnreachable, "%v", err)
}

func (d *Downloader) fetch(ctx context.Context, u *url.URL, q *Quota, f Framing) (Image, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return Image{}, newError(ErrInvalidURL, "invalid URL: %v", err)
	}
	resp, err := d.client.Do(req)
	if err != nil {
		return Image{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return Image{}, newError(ErrStatus, "HTTP %d", resp.StatusCode)
	}
	mediaType, sniff := headerType(resp.Header.Get("Content-Type"))
	if !sniff && !ImageType(mediaType) {
		return Image{}, newError(ErrNotImage, "content type %q is not an allowed image type", truncate(mediaType))
	}
	if resp.ContentLength > d.maxSize {
		return Image{}, newError(ErrTooLarge, "content length %d exceeds %d bytes", resp.ContentLength, d.maxSize)
	}
	if sniff {
		mediaType = ""
	}
	return read(ctx, resp, mediaType, d.maxSize, q, f)
}

// genericTypes say nothing about the bytes: the body is sniffed instead.
var genericTypes = []string{"", "application/octet-stream", "binary/octet-stream"}

// headerType returns the bare lowercase media type of a Content-Type value
// and whether it is absent or generic.
func headerType(v string) (mediaType string, generic bool) {
	mediaType, _, err := mime.ParseMediaType(v)
	if err != nil {
		mediaType, _, _ = strings.Cut(v, ";")
		mediaType = strings.ToLower(strings.TrimSpace(mediaType))
	}
	return mediaType, slices.Contains(genericTypes, mediaType)
}
