package media_test

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/internal/media"
)

// A host that ends in a number but is not an IP address as netip writes
// one (four decimal octets, or IPv6) is refused before any lookup: other
// resolvers (getaddrinfo's inet_aton, browsers' URL parsers) read 127.1,
// 0x7f000001 or 017700000001 as 127.0.0.1, the pure-Go one asks DNS.
func TestDownloadRefusesNumericHostsThatAreNotAddresses(t *testing.T) {
	t.Parallel()
	hosts := []string{
		"127.1", "0x7f000001", "017700000001", "2130706433", "127.0.0.01", "0177.0.0.1",
		"0x7f.0.0.1", "127.0.0.1.", "1.2.3.4.5", "8.8.8.8.", "images.test.0x10", "images.123",
	}
	for _, host := range hosts {
		t.Run(host, func(t *testing.T) {
			t.Parallel()
			r := newResolver(nil)
			d := newDownloader(t, config(), media.WithResolver(r))
			url := "http://" + host + "/a.png"
			require.ErrorIs(t, d.Check(url), media.ErrInvalidURL)
			_, err := d.Download(context.Background(), url, nil, media.Framing{})
			require.ErrorIs(t, err, media.ErrInvalidURL)
			var me *media.Error
			require.ErrorAs(t, err, &me)
			assert.True(t, me.ClientFault())
			assert.Equal(t, `host "`+host+`" is not valid: an IPv4 address is four decimal numbers (a.b.c.d)`, err.Error())
			assert.Zero(t, r.Calls(host), "no lookup")
		})
	}
	// Names and addresses as netip writes them go on to the dial-time policy.
	d := newDownloader(t, config(), media.WithResolver(newResolver(nil)))
	for _, host := range []string{"8.8.8.8", "[2001:db8::1]", "[::ffff:8.8.8.8]", "images.test", "123abc.test", "images.test."} {
		assert.NoError(t, d.Check("http://"+host+"/a.png"), host)
	}
}

// Every redirect hop is vetted the same way.
func TestDownloadRefusesARedirectToANumericHost(t *testing.T) {
	t.Parallel()
	o := newOrigin(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://0x7f000001/a.png", http.StatusFound)
	})
	_, err := newDownloader(t, config()).Download(context.Background(), o.URL, nil, media.Framing{})
	require.ErrorIs(t, err, media.ErrInvalidURL)
	assert.Contains(t, err.Error(), `host "0x7f000001" is not valid`)
}

// A name that does not exist is the client's fault (400); a lookup that
// failed for another reason is not (502).
func TestDownloadHostThatDoesNotResolve(t *testing.T) {
	t.Parallel()
	notFound := func(host string) error { return &net.DNSError{Err: "no such host", Name: host, IsNotFound: true} }
	tests := []struct {
		name, host string
		err        error // the resolver's
		reason     error
		msg        string
		lookups    int
	}{
		{name: "no such host", host: "nowhere.test", err: notFound("nowhere.test"), reason: media.ErrUnresolvable, msg: `host "nowhere.test" does not resolve`, lookups: 1},
		{name: "no addresses", host: "empty.test", reason: media.ErrUnresolvable, msg: `host "empty.test" does not resolve`, lookups: 1},
		{name: "an .invalid name (RFC 6761)", host: "nonexistent.invalid", reason: media.ErrUnresolvable, msg: `host "nonexistent.invalid" does not resolve`},
		{name: "an .invalid name, any case, rooted", host: "x.INVALID.", reason: media.ErrUnresolvable, msg: `host "x.INVALID." does not resolve`},
		{name: "temporary failure", host: "flaky.test", err: &net.DNSError{Err: "server misbehaving", Name: "flaky.test", IsTemporary: true},
			reason: media.ErrUnreachable, msg: "lookup flaky.test: server misbehaving", lookups: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := &failingResolver{err: tt.err}
			d := newDownloader(t, config(), media.WithResolver(r))
			_, err := d.Download(context.Background(), "http://"+tt.host+"/a.png", nil, media.Framing{})
			require.ErrorIs(t, err, tt.reason)
			var me *media.Error
			require.ErrorAs(t, err, &me)
			assert.Equal(t, tt.reason != media.ErrUnreachable, me.ClientFault())
			assert.Contains(t, err.Error(), tt.msg)
			assert.Equal(t, tt.lookups, int(r.calls.Load()))
		})
	}
}

// failingResolver answers every lookup with err, or no addresses.
type failingResolver struct {
	err   error
	calls atomic.Int32
}

func (r *failingResolver) LookupNetIP(context.Context, string, string) ([]netip.Addr, error) {
	r.calls.Add(1)
	return nil, r.err
}
