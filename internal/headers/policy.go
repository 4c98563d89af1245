package headers

import (
	"net/http"
	"net/textproto"
	"slices"
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
// hop-by-hop ones (isHopByHop) and the routing ones (Routing): headers the
// HTTP client sets itself, those describing a body the coordinator writes
// itself, and headers the coordinator owns.
var notForwarded = map[string]bool{
	// set per leg by the client
	"host": true, "content-length": true, "content-type": true, "expect": true,
	// the client's body, not the leg's (bodyHeaders)
	"content-encoding": true, "content-range": true, "digest": true, "content-md5": true,
	"repr-digest": true, "content-digest": true,
	// owned by the coordinator: a client must not pick the id legs carry.
	"x-request-id": true,
	// legs are uncompressed: a gzip answer could not be relayed as is.
	"accept-encoding": true,
}

// bodyHeaders describe the client's body as it came: a relayed body that
// the coordinator did not rewrite carries them (Passthrough), no other leg
// does.
var bodyHeaders = [...]string{"content-encoding", "content-range", "digest", "content-md5", "repr-digest", "content-digest"}

// internalPrefix starts the names of headers reserved to the coordinator
// for its own signals to workers: a client's never reaches a leg.
const internalPrefix = "x-coordinator-"

// Forwardable reports whether a client header (any case) may reach a leg,
// leaving aside the headers a Connection header names (see DropHopByHop)
// and the routing headers a Trusted set lets through.
func Forwardable(name string) bool {
	lk := strings.ToLower(name)
	return !notForwarded[lk] && !isHopByHop(lk) && !strings.HasPrefix(lk, internalPrefix) && !routing(lk)
}

// Routing reports whether a header (any case) is in the routing namespace
// the coordinator owns (compat D24): the gateway's and llm-d's steering
// headers (x-gateway-*, x-llm-d-*, x-*-host-port, x-data-parallel-rank),
// EPP-Profile (each leg's phase) and Prefer (decision D6: only
// conditional-decode makes a leg conditional). A client's never reaches a
// leg, the render service or the passthrough, unless Trusted names it.
func Routing(name string) bool { return routing(strings.ToLower(name)) }

func routing(lk string) bool {
	switch lk {
	case "epp-profile", "prefer", "x-data-parallel-rank":
		return true
	}
	return strings.HasPrefix(lk, "x-gateway-") || strings.HasPrefix(lk, "x-llm-d-") ||
		len(lk) > len("x--host-port") && strings.HasPrefix(lk, "x-") && strings.HasSuffix(lk, "-host-port")
}

// Trustable reports whether a Trusted set may name a header: a routing
// header other than EPP-Profile and Prefer, which each leg sets itself.
func Trustable(name string) bool {
	lk := strings.ToLower(name)
	return routing(lk) && lk != "epp-profile" && lk != "prefer"
}

// Trusted is the set of routing headers a client may set after all
// (server.trusted_routing_headers): they reach the legs as other client
// headers do. The zero value trusts none.
type Trusted struct {
	m map[string]bool
}

// NewTrusted trusts names (any case); a name that is not Trustable is
// ignored (config validation refuses it).
func NewTrusted(names ...string) Trusted {
	t := Trusted{m: make(map[string]bool, len(names))}
	for _, name := range names {
		if Trustable(name) {
			t.m[strings.ToLower(name)] = true
		}
	}
	return t
}

// admits sorts a client header (lowercase name) that is not Forwardable:
// pass when t trusts it, routing when it is a routing header t does not
// trust (dropped, and reported).
func (t Trusted) admits(lk string) (pass, isRouting bool) {
	if !routing(lk) {
		return false, false
	}
	return t.m[lk], !t.m[lk]
}

// FromHTTP returns the client headers every leg carries: the first value
// of each Forwardable header, and of each routing header t trusts, less
// those in's Connection header names; and the routing headers it dropped
// (lowercase, sorted; nil for none). in is not modified; the result shares
// its values.
func FromHTTP(in http.Header, t Trusted) (Forwarded, []string) {
	out := Forwarded{m: make(map[string][]string, len(in))}
	var dropped []string
	for k, v := range in {
		if len(v) == 0 {
			continue
		}
		lk := strings.ToLower(k)
		if Forwardable(lk) {
			out.set(lk, v[:1:1])
			continue
		}
		switch pass, isRouting := t.admits(lk); {
		case pass:
			out.set(lk, v[:1:1])
		case isRouting:
			dropped = append(dropped, lk)
		}
	}
	for _, name := range connectionOptions(in) {
		out.Del(name)
	}
	slices.Sort(dropped)
	return out, dropped
}

// Passthrough is what a relayed request on an unregistered path carries of
// the client's headers: those of FromHTTP plus its Content-Type (the body
// is the client's own), and, when the body goes byte for byte as it came
// (asSent), the headers describing it (Content-Encoding, Digest, ...); and
// the routing headers it dropped.
func Passthrough(in http.Header, t Trusted, asSent bool) (Forwarded, []string) {
	f, dropped := FromHTTP(in, t)
	if ct := in.Get("Content-Type"); ct != "" {
		f.set("content-type", []string{ct})
	}
	if asSent {
		for _, name := range bodyHeaders {
			if v := in.Values(name); len(v) > 0 {
				f.set(name, v[:1:1])
			}
		}
	}
	return f, dropped
}

// Encoded reports whether a request's Content-Encoding values say its body
// is coded (anything but identity): the coordinator does not decode
// request bodies, so one it must parse is refused.
func Encoded(h http.Header) bool {
	for _, v := range h.Values("Content-Encoding") {
		for coding := range strings.SplitSeq(v, ",") {
			if c := textproto.TrimString(coding); c != "" && !strings.EqualFold(c, "identity") {
				return true
			}
		}
	}
	return false
}

// userAgentKey is the call metadata key a REST client's User-Agent travels
// under into the in-process gRPC call (grpc-gateway's own spelling): the
// call's user-agent is the in-process channel's.
const userAgentKey = "grpcgateway-user-agent"

// FromMetadata returns the call metadata every leg carries as headers:
// the first value of each Forwardable key that is not gRPC's own, of each
// routing key t trusts, and the client's User-Agent (userAgent); and the
// routing keys it dropped (sorted; nil for none).
func FromMetadata(md metadata.MD, t Trusted) (Forwarded, []string) {
	out := Forwarded{m: make(map[string][]string, len(md))}
	var dropped []string
	for k, v := range md {
		if len(v) == 0 || grpcOwned(k) || k == userAgentKey {
			continue
		}
		if Forwardable(k) {
			out.set(k, v[:1:1])
			continue
		}
		switch pass, isRouting := t.admits(k); {
		case pass:
			out.set(k, v[:1:1])
		case isRouting:
			dropped = append(dropped, k)
		}
	}
	if ua := userAgent(md); ua != "" {
		out.set("user-agent", []string{ua})
	}
	slices.Sort(dropped)
	return out, dropped
}

// userAgent is the client's User-Agent in call metadata: a REST client's
// (userAgentKey), else the gRPC client's less the "grpc-go/…" product
// grpc-go appends to every client's; "" when that leaves nothing.
func userAgent(md metadata.MD) string {
	if v := md[userAgentKey]; len(v) > 0 {
		return v[0]
	}
	v := md["user-agent"]
	if len(v) == 0 {
		return ""
	}
	ua := v[0]
	if i := strings.LastIndex(ua, "grpc-go/"); i >= 0 && !strings.Contains(ua[i:], " ") && (i == 0 || ua[i-1] == ' ') {
		ua = ua[:i]
	}
	return textproto.TrimString(ua)
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
// matcher): its lowercase name when a leg may receive it, or when it is a
// routing header (FromMetadata drops and reports it, or lets a trusted one
// through); User-Agent under userAgentKey. Authorization is not matched:
// grpc-gateway forwards it itself.
func MetadataKey(name string) (string, bool) {
	k := strings.ToLower(name)
	switch {
	case k == "user-agent":
		return userAgentKey, true
	case k == "authorization" || k == userAgentKey:
		return "", false
	case Forwardable(k) || routing(k) || k == ContinueOnPause:
		return k, true
	}
	return "", false
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
