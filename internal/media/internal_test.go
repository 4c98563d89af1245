package media

import (
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTransportIgnoresTheEnvironmentProxy(t *testing.T) {
	t.Parallel()
	d, err := New(Config{Timeout: time.Second, MaxSize: 1})
	require.NoError(t, err)
	assert.Nil(t, d.transport.Proxy, "HTTP(S)_PROXY would put the proxy's address, not the origin's, under the guard")
	assert.NotNil(t, d.client.CheckRedirect)
}

// The guard runs in the dialer's Control hook: a refused address never gets
// a connect(2), whatever name led to it.
func TestControlRefusesBeforeConnecting(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		address string
	}{
		{name: "private literal", address: "10.0.0.1:80"},
		{name: "metadata literal", address: "169.254.169.254:80"},
		{name: "v4-mapped metadata literal", address: "[::ffff:169.254.169.254]:80"},
		{name: "name resolving to private", address: "internal.test:80"},
		{name: "name resolving to public then private: each address vetted", address: "mixed.test:80"},
	}
	r := resolverFunc(func(host string) ([]netip.Addr, error) {
		switch host {
		case "internal.test":
			return []netip.Addr{netip.MustParseAddr("10.1.2.3")}, nil
		case "mixed.test":
			return []netip.Addr{netip.MustParseAddr("192.168.0.1"), netip.MustParseAddr("fd00::1")}, nil
		}
		return nil, errors.New("no such host")
	})
	g := newGuardedDialer(r, AddressPolicy(false))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			conn, err := g.DialContext(context.Background(), "tcp", tt.address)
			require.Error(t, err)
			assert.Nil(t, conn)
			assert.ErrorIs(t, err, ErrBlockedAddress)
			var me *Error
			require.ErrorAs(t, err, &me)
			assert.True(t, me.ClientFault())
		})
	}
}

type resolverFunc func(host string) ([]netip.Addr, error)

func (f resolverFunc) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	return f(host)
}
