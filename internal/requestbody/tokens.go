package requestbody

import (
	"github.com/coordinator-project/coordinator/internal/jsonbody"
)

// Tokens is a prompt's token IDs, held as the IDs, as their JSON encoding
// ("[1,2,3]", as jsonbody.AppendUint32s writes it), or both: each is made
// from the other once, on first use, and kept. A prompt the client sent as
// token IDs thus reaches every leg as the client's own bytes, never
// decoded; one render returned is encoded once for all legs.
//
// The zero value is no tokens. IDs and JSON are not safe for concurrent
// first use (a step that fans out calls them before it does); Len and At
// are.
type Tokens struct {
	n    int
	ids  []uint32
	json []byte
}

// NewTokens holds ids (which the Tokens then owns).
func NewTokens(ids []uint32) Tokens { return Tokens{n: len(ids), ids: ids} }

// NewTokensEncoded holds ids and their JSON, which must be
// jsonbody.AppendUint32s of ids (a body that already carries them).
func NewTokensEncoded(ids []uint32, json []byte) Tokens {
	return Tokens{n: len(ids), ids: ids, json: json}
}

// TokensOfJSON holds the n token IDs encoded as raw, which must be written
// exactly as jsonbody.AppendUint32s writes them (Uint32Stats.Canonical).
func TokensOfJSON(raw []byte, n int) Tokens { return Tokens{n: n, json: raw} }

// TokensOf reads a token-ID array that ParseIndexed indexed with Uint32s
// and found valid (Bad < 0): its bytes when canonical, else its IDs.
func TokensOf(a *jsonbody.Array, st jsonbody.Uint32Stats) (Tokens, error) {
	raw := a.Raw()
	if st.Canonical {
		return TokensOfJSON(raw, st.Len), nil
	}
	ids, err := jsonbody.Uint32s(raw)
	if err != nil {
		return Tokens{}, err
	}
	return NewTokens(ids), nil
}

// Len is the number of token IDs.
func (t Tokens) Len() int { return t.n }

// IDs returns the token IDs, decoding them on first use. The slice is the
// Tokens' own: do not modify it.
func (t *Tokens) IDs() []uint32 {
	if t.ids == nil && t.json != nil {
		t.ids, _ = jsonbody.Uint32s(t.json) // canonical: cannot fail
	}
	return t.ids
}

// At returns token ID i (0 <= i < Len) without decoding the others, and
// without changing t: safe for concurrent use.
func (t *Tokens) At(i int) uint32 {
	if t.ids != nil {
		return t.ids[i]
	}
	if v, ok := jsonbody.Uint32At(t.json, i); ok {
		return v
	}
	ids, _ := jsonbody.Uint32s(t.json) // unreachable: json is canonical
	return ids[i]
}

// JSON returns the token IDs as a JSON array, encoding them on first use.
// The slice is the Tokens' own: do not modify it.
func (t *Tokens) JSON() []byte {
	if t.json == nil {
		t.json = jsonbody.AppendUint32s(make([]byte, 0, 2+11*len(t.ids)), t.ids)
	}
	return t.json
}
