package headers

import (
	"net/http"
	"net/textproto"
	"strings"

	"google.golang.org/grpc/metadata"
)

// This file is the whole header policy. The boundaries:
//
//	REST client ──FromHTTP──────────────▶ legs (the passthrough: Passthrough)
//	REST client ──MetadataKey (grpc-gateway)─▶ in-process gRPC call ──FromMetadata──▶ legs
//	gRPC client ──────────────────────────────────────────────────────FromMetadata──▶ legs
//	worker answer ──AnswerMetadata──▶ call header metadata ──▶ gRPC client
//	call header metadata ──ResponseKey──▶ REST client
//	any relayed answer ──DropHopByHop──▶ client

// notForwarded are the client headers no leg receives besides the
// hop-by-hop ones (isHopByHop): headers the HTTP client sets itself, and
// headers the coordinator owns.
var notForwarded = map[string]bool{
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

// Forwardable reports whether a client header (any case) may reach a leg,
// leaving aside the headers a Connection header names (see DropHopByHop).
func Forwardable(name string) bool {
	lk := strings.ToLower(name)
	return !notForwarded[lk] && !isHopByHop(lk) && !strings.HasPrefix(lk, internalPrefix)
}

// FromHTTP returns the client headers every leg carries: the first value
// of each Forwardable header less those in's Connection header names. in
// is not modified; the result shares its values.
func FromHTTP(in http.Header) Forwarded {
	out := Forwarded{m: make(map[string][]string, len(in))}
	for k, v := range in {
		if len(v) == 0 {
			continue
		}
		if lk := strings.ToLower(k); Forwardable(lk) {
			out.set(lk, v[:1:1])
		}
	}
	for _, name := range connectionOptions(in) {
		out.Del(name)
	}
	return out
}

// Passthrough is what a relayed request on an unregistered path carries of
// the client's headers: those of FromHTTP plus its Content-Type (the body
// is the client's own).
func Passthrough(in http.Header) Forwarded {
	f := FromHTTP(in)
	if ct := in.Get("Content-Type"); ct != "" {
		f.set("content-type", []string{ct})
	}
	return f
}

// FromMetadata returns the call metadata every leg carries as headers:
// the first value of each Forwardable key that is not gRPC's own.
func FromMetadata(md metadata.MD) Forwarded {
	out := Forwarded{m: make(map[string][]string, len(md))}
	for k, v := range md {
		if len(v) == 0 || grpcOwned(k) || !Forwardable(k) {
			continue
		}
		out.set(k, v[:1:1])
	}
	return out
}

// grpcOwned reports metadata keys that belong to the gRPC transport.
func grpcOwned(key string) bool {
	switch key {
	case "user-agent", "content-type", "te", "grpc-accept-encoding", "grpc-encoding", "grpc-timeout":
		return true
	}
	return strings.HasPrefix(key, ":") || strings.HasPrefix(key, "grpc-") || strings.HasSuffix(key, "-bin")
}

// MetadataKey is the call metadata key a REST client's header travels
// under into the in-process gRPC call (grpc-gateway's incoming header
// matcher): its lowercase name when a leg may receive it. Authorization is
// not matched: grpc-gateway forwards it itself; User-Agent is gRPC's own.
func MetadataKey(name string) (string, bool) {
	k := strings.ToLower(name)
	if !Forwardable(k) || k == "user-agent" || k == "authorization" {
		return "", false
	}
	return k, true
}

// validMetadataValue reports whether v can travel as gRPC ASCII metadata.
func validMetadataValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if v[i] < 0x20 || v[i] > 0x7e {
			return false
		}
	}
	return true
}

// allValidMetadataValues reports whether every value of v can travel as
// gRPC ASCII metadata.
func allValidMetadataValues(v []string) bool {
	for _, value := range v {
		if !validMetadataValue(value) {
			return false
		}
	}
	return true
}

// validMetadataKey reports whether a lowercase name can be a gRPC metadata
// key: 0-9 a-z - _ . only (gRPC refuses a whole header set holding one
// that is not).
func validMetadataKey(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// notRelayed are the headers of a worker's answer that never reach the
// client as the worker sent them: the framing the coordinator writes itself
// (Content-Length; the Content-Type travels in the answer's message) and
// the headers it owns (X-Request-Id; Server-Timing, the coordinator's step
// timings).
var notRelayed = map[string]bool{
	"content-length": true, "content-type": true, "x-request-id": true, "server-timing": true,
}

// relayable reports whether a header of a worker's answer (lowercase name)
// reaches the client: not hop-by-hop, not one the coordinator owns, not
// gRPC's own, and valid as a metadata key.
func relayable(key string) bool {
	return validMetadataKey(key) && !notRelayed[key] && !isHopByHop(key) && !grpcOwned(key)
}

// AnswerMetadata is the call header metadata the headers of a worker's
// answer become (the decode leg's, or a conditional-decode hit's; 2xx and
// relayed 4xx/5xx alike): each relayable header less those its Connection
// header names, with every value that can travel as metadata. gRPC
// clients get it as response header metadata; the REST front turns it back
// into headers (ResponseKey). h is not modified; the result may share its
// value slices.
func AnswerMetadata(h http.Header) metadata.MD {
	md := make(metadata.MD, len(h))
	for k, v := range h {
		lk := strings.ToLower(k)
		if !relayable(lk) {
			continue
		}
		if allValidMetadataValues(v) {
			if len(v) > 0 {
				md[lk] = v
			}
			continue
		}
		for _, value := range v {
			if validMetadataValue(value) {
				md[lk] = append(md[lk], value)
			}
		}
	}
	for _, name := range connectionOptions(h) {
		delete(md, strings.ToLower(name))
	}
	return md
}

// ResponseKey is the REST response header a key of the call's header
// metadata becomes (grpc-gateway's outgoing header matcher): the step
// timings as Server-Timing, and the worker's headers (AnswerMetadata) under
// their canonical names. X-Request-Id is not matched: the REST front sets
// it itself.
func ResponseKey(key string) (string, bool) {
	if key == "server-timing" {
		return "Server-Timing", true
	}
	if !relayable(key) {
		return "", false
	}
	return textproto.CanonicalMIMEHeaderKey(key), true
}

// hopByHop are the headers that describe one connection and are never
// relayed (RFC 9110 §7.6.1), besides those Connection names.
var hopByHop = [...]string{
	"Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization",
	"Proxy-Connection", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

// hopByHopLower is hopByHop by lowercase name.
var hopByHopLower = func() map[string]bool {
	m := make(map[string]bool, len(hopByHop))
	for _, name := range hopByHop {
		m[strings.ToLower(name)] = true
	}
	return m
}()

// isHopByHop reports whether a lowercase name is a hop-by-hop header.
func isHopByHop(key string) bool { return hopByHopLower[key] }

// DropHopByHop removes h's hop-by-hop headers, those its Connection header
// names included: from an answer before it is relayed, and from a client's
// request before its headers are matched one by one (MetadataKey).
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
