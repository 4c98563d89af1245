package media

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"syscall"
	"time"
)

// Policy decides whether the downloader may connect to addr, the IP
// address a connection is about to be made to. addr is normalised first:
// an IPv4-mapped IPv6 address is unmapped and any zone is dropped. Policy
// returns nil to allow the connection, or an error saying why not ("loopback").
type Policy func(addr netip.Addr) error

// AddressPolicy is the production policy. Always refused: unspecified
// addresses and 0.0.0.0/8, loopback, link-local unicast and multicast
// (169.254.169.254 and fe80::/10 included), all other multicast, the
// limited broadcast and the rest of 240.0.0.0/4, carrier-grade NAT
// 100.64.0.0/10 and IPv6 unique-local fc00::/7. RFC 1918 networks (10/8,
// 172.16/12, 192.168/16) are refused unless allowPrivateNetworks. An IPv4
// address embedded in the NAT64 well-known prefix 64:ff9b::/96 is judged as
// that IPv4 address. Every other address is allowed.
func AddressPolicy(allowPrivateNetworks bool) Policy {
	return func(addr netip.Addr) error { return checkAddress(addr, allowPrivateNetworks) }
}

var (
	thisNetwork = netip.MustParsePrefix("0.0.0.0/8")
	cgnat       = netip.MustParsePrefix("100.64.0.0/10")
	reserved    = netip.MustParsePrefix("240.0.0.0/4") // includes 255.255.255.255
	nat64       = netip.MustParsePrefix("64:ff9b::/96")
)

func checkAddress(a netip.Addr, allowPrivate bool) error {
	a = normalize(a)
	if nat64.Contains(a) {
		b := a.As16()
		v4 := netip.AddrFrom4([4]byte(b[12:]))
		if err := checkAddress(v4, allowPrivate); err != nil {
			return fmt.Errorf("NAT64 of %s: %w", v4, err)
		}
		return nil
	}
	var reason string
	switch {
	case !a.IsValid():
		reason = "invalid"
	case a.IsUnspecified(), thisNetwork.Contains(a):
		reason = "unspecified"
	case a.IsLoopback():
		reason = "loopback"
	case a.IsLinkLocalUnicast(), a.IsLinkLocalMulticast():
		reason = "link-local"
	case a.IsMulticast():
		reason = "multicast"
	case reserved.Contains(a):
		reason = "broadcast or reserved"
	case cgnat.Contains(a):
		reason = "carrier-grade NAT"
	case a.Is6() && a.IsPrivate():
		reason = "unique local"
	case a.IsPrivate() && !allowPrivate:
		reason = "private network"
	default:
		return nil
	}
	return errors.New(reason)
}

func normalize(a netip.Addr) netip.Addr { return a.Unmap().WithZone("") }

// Resolver looks up a host name's addresses; *net.Resolver is one.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// guardedDialer resolves with its Resolver and dials each address in turn.
// The Policy runs in the dialer's Control hook, on the address of the socket
// being connected, so whatever a name resolved to (now or at any earlier
// check) only an address the Policy allows is ever connected to: DNS
// rebinding cannot slip a private address past it, and every redirect hop
// dials through it too.
type guardedDialer struct {
	resolver Resolver
	policy   Policy
	dialer   net.Dialer
}

func newGuardedDialer(resolver Resolver, policy Policy) *guardedDialer {
	g := &guardedDialer{resolver: resolver, policy: policy}
	g.dialer = net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second, ControlContext: g.control}
	return g
}

// control refuses a socket whose remote address the policy does not allow;
// it runs before connect(2).
func (g *guardedDialer) control(_ context.Context, _, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return newError(ErrBlockedAddress, "address %q is not allowed: not an IP address", address)
	}
	addr := normalize(ap.Addr())
	if err := g.policy(addr); err != nil {
		return newError(ErrBlockedAddress, "address %s is not allowed: %v", addr, err)
	}
	return nil
}

// DialContext has the signature of http.Transport.DialContext.
func (g *guardedDialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	host, portText, err := net.SplitHostPort(address)
	if err != nil {
		return nil, err
	}
	port, err := strconv.ParseUint(portText, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("invalid port %q", portText)
	}
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{a}
	} else {
		addrs, err = lookup(ctx, g.resolver, host)
		if err != nil {
			return nil, err
		}
	}
	// Try each address; a refused one is never connected to. Report a
	// refusal over a network error: it is the more telling of the two.
	var firstErr error
	for _, a := range addrs {
		conn, err := g.dialer.DialContext(ctx, network, netip.AddrPortFrom(a, uint16(port)).String())
		if err == nil {
			return conn, nil
		}
		if firstErr == nil || (errors.Is(err, ErrBlockedAddress) && !errors.Is(firstErr, ErrBlockedAddress)) {
			firstErr = err
		}
		if ctx.Err() != nil {
			break
		}
	}
	return nil, firstErr
}
