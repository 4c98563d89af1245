package upstream

import (
	"net/http"
	"strings"
)

// notForwarded are the client headers no leg receives: hop-by-hop headers,
// headers the HTTP client sets itself, and headers the coordinator owns.
var notForwarded = map[string]bool{
	// hop-by-hop (RFC 9110 §7.6.1)
	"connection": true, "keep-alive": true, "proxy-authenticate": true,
	"proxy-authorization": true, "te": true, "trailer": true,
	"transfer-encoding": true, "upgrade": true, "proxy-connection": true,
	// set per leg by the client
	"host": true, "content-length": true, "content-type": true, "expect": true,
	// owned by the coordinator: a client must not choose the phase (EPP-Profile),
	// make a leg conditional (Prefer, decision D6) or pick the id legs carry.
	"epp-profile": true, "prefer": true, "x-request-id": true,
	// legs are uncompressed: a gzip answer could not be relayed as is.
	"accept-encoding": true,
}

// ForwardedHeaders returns the client headers every leg carries: keys
// lowercased, the first value of each, and the headers above removed.
func ForwardedHeaders(in http.Header) http.Header {
	out := make(http.Header, len(in))
	for k, v := range in {
		if len(v) == 0 {
			continue
		}
		lk := strings.ToLower(k)
		if notForwarded[lk] {
			continue
		}
		out[lk] = v[:1:1]
	}
	return out
}

// Forwardable reports whether a client header (any case) may reach a leg.
func Forwardable(name string) bool {
	return !notForwarded[strings.ToLower(name)]
}
