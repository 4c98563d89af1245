package steps

import "github.com/coordinator-project/coordinator/internal/wire/features"

// tokensExtension is a request's chat "tokens" extension, written once for
// every leg that carries it, and what it was written from.
type tokensExtension struct {
	json   []byte
	ids    []byte
	images []features.MultimodalEntry
}

// TokensExtension returns rc's chat "tokens" extension
// (features.AppendTokens of its Tokens and Multimodal): written on first
// use, and again only when a step has since replaced rc.Tokens or
// rc.Multimodal.
func (rc *RequestContext) TokensExtension() []byte {
	ids := rc.Tokens.JSON()
	c := &rc.tokensExt
	if c.json != nil && sameMemory(c.ids, ids) && sameEntries(c.images, rc.Multimodal) {
		return c.json
	}
	size := len(ids) + 96 // the members' names and braces, the features' too
	for _, e := range rc.Multimodal {
		size += 64 + len(e.Hash) // a hash and a placeholder
	}
	c.json = features.AppendTokens(make([]byte, 0, size), ids, rc.Multimodal)
	c.ids, c.images = ids, rc.Multimodal
	return c.json
}

// sameMemory reports whether a and b are the same bytes in memory.
func sameMemory(a, b []byte) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// sameEntries reports whether a and b are the same slice.
func sameEntries(a, b []features.MultimodalEntry) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}
