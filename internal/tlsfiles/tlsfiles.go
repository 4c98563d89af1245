// Package tlsfiles loads the coordinator's TLS certificates and keys from
// files and reloads them when the files change, for the listeners (Server)
// and the outbound legs (Client).
//
// Files are checked on the TLS handshake path, not by a poller: a handshake
// stats them at most once per Options.CheckInterval (1s), and when any file's
// size or modification time changed since the last attempt they are loaded
// again. The next handshake uses what was loaded; connections already open
// keep theirs. A reload that fails (a missing file, a key that does not match
// its certificate, an expired certificate, as when only one of the two files
// was replaced so far) is logged at error and the previous files stay in use;
// the next change is tried again. Each reload attempt is logged (info, or
// error) and reported to Options.Observer.
//
// Every config uses TLS 1.2 at least and Go's default cipher suites and
// curves.
package tlsfiles

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Reload results, the result label of the reload metric.
const (
	ResultOK    = "ok"
	ResultError = "error"
)

// MinVersion is the lowest TLS version any config accepts.
const MinVersion = tls.VersionTLS12

// Observer is told of every reload attempt (metrics). Safe for concurrent
// use.
type Observer interface {
	// TLSReload reports a reload of the file set named fileSet (Options.Name)
	// with result ResultOK or ResultError.
	TLSReload(fileSet, result string)
}

// Options are a file set's name, where it reports, and its clock.
type Options struct {
	// Name names the file set in logs and metrics: its config key, e.g.
	// "server.tls" or "gateway.tls".
	Name string
	// Log gets the reload lines and the insecure_skip_verify warning; nil
	// discards them.
	Log *slog.Logger
	// Observer, if set, is told of each reload attempt.
	Observer Observer
	// CheckInterval is the least time between two checks of the files.
	// Default 1s.
	CheckInterval time.Duration
	// Now is the clock (certificate validity, check throttling); nil is
	// time.Now.
	Now func() time.Time
}

func (o Options) now() time.Time {
	if o.Now != nil {
		return o.Now()
	}
	return time.Now()
}

func (o Options) log() *slog.Logger {
	if o.Log != nil {
		return o.Log
	}
	return slog.New(slog.DiscardHandler)
}

// files are the paths of one tls object and the key names of its fields
// (for errors).
type files struct {
	certFile, keyFile string
	caFile, caKey     string // caKey: "client_ca_file" (server) or "ca_file" (client)
}

func (f files) paths() []string {
	var p []string
	for _, s := range []string{f.certFile, f.keyFile, f.caFile} {
		if s != "" {
			p = append(p, s)
		}
	}
	return p
}

// loaded is what one load read: nil fields were not configured.
type loaded struct {
	cert *tls.Certificate
	pool *x509.CertPool
}

// load reads and checks the files; errors start with the key at fault.
func (f files) load(now time.Time) (*loaded, error) {
	var l loaded
	if f.certFile != "" {
		cert, err := loadPair(f.certFile, f.keyFile, now)
		if err != nil {
			return nil, err
		}
		l.cert = cert
	}
	if f.caFile != "" {
		pool, err := loadPool(f.caKey, f.caFile)
		if err != nil {
			return nil, err
		}
		l.pool = pool
	}
	return &l, nil
}

// loadPair reads a certificate chain and its private key. The leaf must be
// valid at now.
func loadPair(certFile, keyFile string, now time.Time) (*tls.Certificate, error) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return nil, fmt.Errorf("cert_file: %w", err)
	}
	certs, err := parseCerts(certPEM)
	if err != nil {
		return nil, fmt.Errorf("cert_file: %s: %w", certFile, err)
	}
	leaf := certs[0]
	switch {
	case now.After(leaf.NotAfter):
		return nil, fmt.Errorf("cert_file: %s: certificate expired on %s", certFile, leaf.NotAfter.UTC().Format(time.RFC3339))
	case now.Before(leaf.NotBefore):
		return nil, fmt.Errorf("cert_file: %s: certificate not valid before %s", certFile, leaf.NotBefore.UTC().Format(time.RFC3339))
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, fmt.Errorf("key_file: %w", err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil { // the certificates parsed: the key is at fault
		return nil, fmt.Errorf("key_file: %s: %w", keyFile, err)
	}
	return &pair, nil
}

// loadPool reads a PEM bundle of CA certificates.
func loadPool(key, path string) (*x509.CertPool, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	certs, err := parseCerts(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %s: %w", key, path, err)
	}
	pool := x509.NewCertPool()
	for _, c := range certs {
		pool.AddCert(c)
	}
	return pool, nil
}

// parseCerts parses every CERTIFICATE block of a PEM file; there must be one
// at least.
func parseCerts(data []byte) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, err
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		return nil, errors.New("no PEM certificate found")
	}
	return certs, nil
}

// stamp is what a stat of one file says about its content.
type stamp struct {
	size    int64
	modTime int64 // unix nanoseconds
	exists  bool
}

func stampsOf(paths []string) []stamp {
	out := make([]stamp, len(paths))
	for i, p := range paths {
		if fi, err := os.Stat(p); err == nil {
			out[i] = stamp{size: fi.Size(), modTime: fi.ModTime().UnixNano(), exists: true}
		}
	}
	return out
}

// reloader holds a file set's last good load and reloads it, on demand,
// when the files changed. Safe for concurrent use.
type reloader struct {
	files files
	paths []string
	opts  Options
	cur   atomic.Pointer[loaded]
	next  atomic.Int64 // unix nanoseconds before which current does not check

	mu   sync.Mutex // guards seen and serializes loads
	seen []stamp    // the files as the last load attempt found them
}

// newReloader loads the files once; an error names the key at fault.
func newReloader(f files, opts Options) (*reloader, error) {
	if opts.CheckInterval <= 0 {
		opts.CheckInterval = time.Second
	}
	r := &reloader{files: f, paths: f.paths(), opts: opts}
	r.seen = stampsOf(r.paths) // before reading: a change during the load shows next time
	l, err := f.load(opts.now())
	if err != nil {
		return nil, err
	}
	r.cur.Store(l)
	r.next.Store(opts.now().Add(opts.CheckInterval).UnixNano())
	return r, nil
}

// current returns the last good load, first reloading the files if they
// changed and were not checked for CheckInterval. One caller checks at a
// time; the others get the current load without waiting.
func (r *reloader) current() *loaded {
	if len(r.paths) == 0 {
		return r.cur.Load()
	}
	now := r.opts.now()
	next := r.next.Load()
	if now.UnixNano() >= next && r.next.CompareAndSwap(next, now.Add(r.opts.CheckInterval).UnixNano()) {
		r.check(now)
	}
	return r.cur.Load()
}

func (r *reloader) check(now time.Time) {
	if !r.mu.TryLock() { // a slow load still running: never hold a handshake
		return
	}
	defer r.mu.Unlock()
	stamps := stampsOf(r.paths)
	if slices.Equal(stamps, r.seen) {
		return
	}
	r.seen = stamps
	log := r.opts.log()
	l, err := r.files.load(now)
	if err != nil {
		log.Error("tls reload failed; keeping the previous files", "file_set", r.opts.Name, "error", fmt.Errorf("%s.%w", r.opts.Name, err))
		r.observe(ResultError)
		return
	}
	r.cur.Store(l)
	attrs := []any{"file_set", r.opts.Name, "files", r.paths}
	if l.cert != nil && l.cert.Leaf != nil {
		attrs = append(attrs, "not_after", l.cert.Leaf.NotAfter.UTC())
	}
	log.Info("tls files reloaded", attrs...)
	r.observe(ResultOK)
}

func (r *reloader) observe(result string) {
	if r.opts.Observer != nil {
		r.opts.Observer.TLSReload(r.opts.Name, result)
	}
}
