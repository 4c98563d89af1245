package media

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
)

// checkHost refuses, without a lookup, a URL host that cannot be fetched
// as written:
//
//   - one that ends in a number (its last label, a trailing dot aside, is
//     decimal digits or 0x and hex digits) but is not an IP address as
//     netip reads one (four decimal octets without leading zeros, or
//     IPv6): 127.1, 0x7f000001, 017700000001, 127.0.0.01. URL parsers
//     (WHATWG) and getaddrinfo read these as IPv4 addresses, the pure-Go
//     resolver as names to ask DNS about: either way the client cannot
//     mean a name, and refusing them leaves no form of an address that
//     reaches the dialer other than the one the address policy judges;
//   - a name under the special-use .invalid domain (RFC 6761 §6.4, which
//     asks resolvers to answer it negatively at once): it does not resolve.
func checkHost(host string) error {
	if _, err := netip.ParseAddr(host); err == nil {
		return nil
	}
	name := strings.TrimSuffix(host, ".")
	last := name[strings.LastIndexByte(name, '.')+1:]
	switch {
	case numericLabel(last):
		return newError(ErrInvalidURL, "host %q is not valid: an IPv4 address is four decimal numbers (a.b.c.d)", truncate(host))
	case strings.EqualFold(last, "invalid"):
		return unresolvable(host)
	}
	return nil
}

// numericLabel reports whether a host label is a number as the WHATWG URL
// parser's "ends in a number" reads one: decimal digits, or 0x (0X) and
// hex digits, possibly none.
func numericLabel(label string) bool {
	digits, base16 := label, false
	if len(label) >= 2 && label[0] == '0' && (label[1] == 'x' || label[1] == 'X') {
		digits, base16 = label[2:], true
	} else if label == "" {
		return false
	}
	for i := 0; i < len(digits); i++ {
		c := digits[i]
		switch {
		case c >= '0' && c <= '9':
		case base16 && (c|0x20) >= 'a' && (c|0x20) <= 'f':
		default:
			return false
		}
	}
	return true
}

func unresolvable(host string) *Error {
	return newError(ErrUnresolvable, "host %q does not resolve", truncate(host))
}

// lookup resolves host with r. A name that does not exist, or has no
// addresses, is ErrUnresolvable (the client's fault); any other failure
// (a DNS server that timed out or failed) is returned as is, the origin's
// side of the download.
func lookup(ctx context.Context, r Resolver, host string) ([]netip.Addr, error) {
	addrs, err := r.LookupNetIP(ctx, "ip", host)
	var dnsErr *net.DNSError
	switch {
	case errors.As(err, &dnsErr) && dnsErr.IsNotFound:
		return nil, unresolvable(host)
	case err != nil:
		return nil, err
	case len(addrs) == 0:
		return nil, unresolvable(host)
	}
	return addrs, nil
}
