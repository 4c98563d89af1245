package headers

import (
	"encoding/base64"
	"strings"
)

// SessionToken is the header of the llm-d EPP's "encoded_endpoint_header"
// session affinity: the EPP writes the pod it chose on the answer, and a
// client that sends it back lands on that pod again.
const SessionToken = "x-session-token"

// PhaseTokens are the session tokens of a P/D request's phases: each the
// token the EPP wrote on that phase's answer.
type PhaseTokens struct {
	Prefill, Decode string
}

// joinedPrefix starts a token JoinSessionTokens made.
const joinedPrefix = "pd1."

// JoinSessionTokens is the one token a client of a P/D pipeline gets: the
// prefill's and the decode's, each base64url-encoded, after "pd1." and
// joined by ".". A client sends it back as it would the EPP's own, and
// SplitSessionToken gives each leg its phase's again.
func JoinSessionTokens(t PhaseTokens) string {
	return joinedPrefix + base64.RawURLEncoding.EncodeToString([]byte(t.Prefill)) + "." +
		base64.RawURLEncoding.EncodeToString([]byte(t.Decode))
}

// SplitSessionToken reads a client's session token: a token
// JoinSessionTokens made gives each phase its own (joined true); a token
// that starts like one and does not decode gives none (joined true, both
// empty: no leg is steered by garbage); any other is the EPP's own, for
// every phase alike (joined false).
func SplitSessionToken(v string) (t PhaseTokens, joined bool) {
	rest, ok := strings.CutPrefix(v, joinedPrefix)
	if !ok {
		return PhaseTokens{}, false
	}
	p, d, ok := strings.Cut(rest, ".")
	if !ok {
		return PhaseTokens{}, true
	}
	prefill, err1 := base64.RawURLEncoding.DecodeString(p)
	decode, err2 := base64.RawURLEncoding.DecodeString(d)
	if err1 != nil || err2 != nil || !validMetadataValue(string(prefill)) || !validMetadataValue(string(decode)) {
		return PhaseTokens{}, true
	}
	return PhaseTokens{Prefill: string(prefill), Decode: string(decode)}, true
}
