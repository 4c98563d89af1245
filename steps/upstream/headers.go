package upstream

import (
	"net/http"
	"net/textproto"
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

// internalPrefix starts the names of headers reserved to the coordinator
// for its own signals to workers: a client's never reaches a leg.
const internalPrefix = "x-coordinator-"

// ForwardedHeaders returns the client headers every leg carries: keys
// lowercased, the first value of each, and neither the headers above, those
// starting with x-coordinator-, nor those in's Connection header names.
func ForwardedHeaders(in http.Header) http.Header {
	out := make(http.Header, len(in))
	for k, v := range in {
		if len(v) == 0 {
			continue
		}
		lk := strings.ToLower(k)
		if !Forwardable(lk) {
			continue
		}
		out[lk] = v[:1:1]
	}
	for _, name := range connectionOptions(in) {
		delete(out, strings.ToLower(name))
	}
	return out
}

// Forwardable reports whether a client header (any case) may reach a leg,
// leaving aside the headers a Connection header names (see DropHopByHop).
func Forwardable(name string) bool {
	lk := strings.ToLower(name)
	return !notForwarded[lk] && !strings.HasPrefix(lk, internalPrefix)
}

// hopByHop are the headers that describe one connection and are never
// relayed (RFC 9110 §7.6.1), besides those Connection names.
var hopByHop = [...]string{
	"Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization",
	"Proxy-Connection", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

// DropHopByHop removes h's hop-by-hop headers, those its Connection header
// names included: from an answer before it is relayed, and from a client's
// request before its headers are matched one by one with Forwardable.
func DropHopByHop(h http.Header) {
	for _, name := range connectionOptions(h) {
		h.Del(name)
	}
	for _, name := range hopByHop {
		delete(h, name)
	}
}

// connectionOptions are the header names listed in h's Connection header.
func connectionOptions(h http.Header) []string {
	var names []string
	for k, values := range h {
		if !strings.EqualFold(k, "Connection") {
			continue
		}
		for _, v := range values {
			for name := range strings.SplitSeq(v, ",") {
				if name = textproto.TrimString(name); name != "" {
					names = append(names, name)
				}
			}
		}
	}
	return names
}
