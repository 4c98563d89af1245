package tlsfiles_test

import (
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// clock is a settable time for Options.Now.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: time.Now()} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// reloads records Observer calls.
type reloads struct {
	mu    sync.Mutex
	calls []string
}

func (r *reloads) TLSReload(fileSet, result string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, fileSet+" "+result)
}

func (r *reloads) got() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.calls...)
}

// logBuffer is a log destination safe for concurrent writes.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// served is how one connection went on the server side.
type served struct {
	err   error
	state tls.ConnectionState
}

// dial connects a TLS client with cfg to a one-connection server with
// srvCfg on 127.0.0.1 and reads what the server answers after its
// handshake ("ok"). It returns the client's error (a refusal shows when the
// client reads, in TLS 1.3), its connection state and the server's side.
func dial(t *testing.T, srvCfg, cfg *tls.Config) (tls.ConnectionState, served, error) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer lis.Close()
	result := make(chan served, 1)
	go func() {
		conn, err := lis.Accept()
		if err != nil {
			result <- served{err: err}
			return
		}
		defer conn.Close()
		tc := tls.Server(conn, srvCfg)
		_ = tc.SetDeadline(time.Now().Add(10 * time.Second))
		if err := tc.Handshake(); err != nil {
			result <- served{err: err}
			return
		}
		_, err = tc.Write([]byte("ok"))
		result <- served{err: err, state: tc.ConnectionState()}
	}()
	cfg = cfg.Clone()
	if cfg.ServerName == "" {
		cfg.ServerName = "127.0.0.1"
	}
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", lis.Addr().String(), cfg)
	var state tls.ConnectionState
	if err == nil {
		state = conn.ConnectionState()
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		var got []byte
		got, err = io.ReadAll(conn)
		if err == nil && string(got) != "ok" {
			err = errors.New("server answered " + string(got))
		}
		conn.Close()
	}
	return state, <-result, err
}

// sendAlways sends cert whatever CAs the server asks for (a client with
// Certificates sends nothing when they do not match).
func sendAlways(cert *tls.Certificate) func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	return func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return cert, nil }
}
