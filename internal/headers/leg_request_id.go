package headers

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"math/rand/v2"
)

// suffixLen is the length of the random part of a leg id: 16 hex digits,
// 64 random bits, so ids made on any number of replicas do not meet.
const suffixLen = 16

// maxLen is the longest valid id.
const maxLen = 128

// LegRequestID returns the id the legs of one request carry when its client
// sent id, a valid id (compat D25): id, cut to leave room, then '-' and
// suffixLen random hex digits. Clients reuse ids (retries, fixed ids, one
// id per session), and a leg's id names its KV hand-off (NIXL's
// remote_request_id): two requests in flight must never share one. The
// result is Valid and starts with (a prefix of) id.
func LegRequestID(id string) string {
	if len(id) > maxLen-1-suffixLen {
		id = id[:maxLen-1-suffixLen]
	}
	var random [8]byte
	binary.LittleEndian.PutUint64(random[:], rand.Uint64())
	b := make([]byte, 0, len(id)+1+suffixLen)
	b = append(b, id...)
	b = append(b, '-')
	return string(hex.AppendEncode(b, random[:]))
}

// IsLegRequestID reports whether legID is the id the legs of a request with id id
// carry: id itself, or one LegRequestID made from it.
func IsLegRequestID(legID, id string) bool {
	if legID == id {
		return true
	}
	n := len(legID) - 1 - suffixLen
	if n < 0 || legID[n] != '-' || !isHex(legID[n+1:]) {
		return false
	}
	if len(id) > maxLen-1-suffixLen {
		id = id[:maxLen-1-suffixLen]
	}
	return legID[:n] == id
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

type mintedKey struct{}

// WithMintedRequestID returns ctx marking the request of the call made on it as
// one whose id the coordinator made (RequestIDOrNew found no valid id to keep),
// for a front that settles the id before it calls the service in process:
// such an id is unique already, and its legs carry it as it is.
func WithMintedRequestID(ctx context.Context) context.Context {
	return context.WithValue(ctx, mintedKey{}, true)
}

// MintedRequestID reports whether ctx carries WithMintedRequestID's mark.
func MintedRequestID(ctx context.Context) bool {
	v, _ := ctx.Value(mintedKey{}).(bool)
	return v
}
