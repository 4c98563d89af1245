package media_test

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/coordinator-project/coordinator/internal/media"
)

func TestAddressPolicy(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		addr    string
		blocked bool // with allow_private_networks: false
		private bool // blocked only because private: allowed when allow_private_networks
	}{
		{name: "metadata", addr: "169.254.169.254", blocked: true},
		{name: "link-local v4", addr: "169.254.0.1", blocked: true},
		{name: "loopback v4", addr: "127.0.0.1", blocked: true},
		{name: "loopback v4 other", addr: "127.8.9.10", blocked: true},
		{name: "loopback v6", addr: "::1", blocked: true},
		{name: "link-local v6", addr: "fe80::1", blocked: true},
		{name: "link-local v6 with zone", addr: "fe80::1%eth0", blocked: true},
		{name: "link-local multicast v4", addr: "224.0.0.1", blocked: true},
		{name: "link-local multicast v6", addr: "ff02::1", blocked: true},
		{name: "multicast v4", addr: "239.1.2.3", blocked: true},
		{name: "multicast v6", addr: "ff0e::1", blocked: true},
		{name: "unspecified v4", addr: "0.0.0.0", blocked: true},
		{name: "this network", addr: "0.1.2.3", blocked: true},
		{name: "unspecified v6", addr: "::", blocked: true},
		{name: "broadcast", addr: "255.255.255.255", blocked: true},
		{name: "reserved", addr: "240.0.0.1", blocked: true},
		{name: "cgnat low", addr: "100.64.0.1", blocked: true},
		{name: "cgnat high", addr: "100.127.255.254", blocked: true},
		{name: "unique local fc00::1", addr: "fc00::1", blocked: true},
		{name: "unique local fd00::1", addr: "fd12:3456::1", blocked: true},
		{name: "rfc1918 10/8", addr: "10.0.0.1", blocked: true, private: true},
		{name: "rfc1918 172.16/12", addr: "172.16.5.4", blocked: true, private: true},
		{name: "rfc1918 172.31", addr: "172.31.255.255", blocked: true, private: true},
		{name: "rfc1918 192.168/16", addr: "192.168.1.1", blocked: true, private: true},
		{name: "v4-mapped metadata", addr: "::ffff:169.254.169.254", blocked: true},
		{name: "v4-mapped loopback", addr: "::ffff:127.0.0.1", blocked: true},
		{name: "v4-mapped private", addr: "::ffff:10.0.0.1", blocked: true, private: true},
		{name: "NAT64 metadata", addr: "64:ff9b::a9fe:a9fe", blocked: true},
		{name: "NAT64 private", addr: "64:ff9b::a00:1", blocked: true, private: true},
		{name: "NAT64 public", addr: "64:ff9b::808:808"},
		{name: "public v4", addr: "8.8.8.8"},
		{name: "public v4 next to cgnat", addr: "100.128.0.1"},
		{name: "public v4 next to 172.16/12", addr: "172.32.0.1"},
		{name: "public v6", addr: "2001:4860:4860::8888"},
		{name: "v4-mapped public", addr: "::ffff:8.8.8.8"},
	}
	strict, lax := media.AddressPolicy(false), media.AddressPolicy(true)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a := netip.MustParseAddr(tt.addr)
			err := strict(a)
			assert.Equal(t, tt.blocked, err != nil, "allow_private_networks=false: %v", err)
			err = lax(a)
			assert.Equal(t, tt.blocked && !tt.private, err != nil, "allow_private_networks=true: %v", err)
		})
	}
}

func TestAddressPolicyNamesTheReason(t *testing.T) {
	t.Parallel()
	p := media.AddressPolicy(false)
	assert.EqualError(t, p(netip.MustParseAddr("10.0.0.1")), "private network")
	assert.EqualError(t, p(netip.MustParseAddr("169.254.169.254")), "link-local")
	assert.EqualError(t, p(netip.MustParseAddr("64:ff9b::a9fe:a9fe")), "NAT64 of 169.254.169.254: link-local")
	assert.EqualError(t, p(netip.Addr{}), "invalid")
}
