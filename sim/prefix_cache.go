package sim

import (
	"bytes"
	"encoding/binary"
	"hash/maphash"
)

// PrefixBlockSize is the token block of the simulated prefix caches, as
// vLLM's default KV block: only whole blocks are cached and hit.
const PrefixBlockSize = 16

// prefixCacheBlocks bounds each pool's prefix cache (the oldest blocks are
// forgotten first).
const prefixCacheBlocks = 1 << 16

// prefixCache is one worker pool's prefix cache: the chained hashes of the
// whole blocks of the prompts it computed, as vLLM's automatic prefix
// caching keys them. Safe for concurrent use.
type prefixCache struct {
	seed   maphash.Seed
	blocks *memory[uint64, struct{}]
}

func newPrefixCache() *prefixCache {
	return &prefixCache{
		seed:   maphash.MakeSeed(),
		blocks: newMemory[uint64, struct{}](prefixCacheBlocks, func(k uint64) uint64 { return k }),
	}
}

// serve reports how many of the prompt's tokens were cached, then caches
// its whole blocks. As vLLM does, a hit counts whole blocks and leaves at
// least the last token to compute: at most (n-1)/16*16 of n tokens. scope
// isolates prompts (model, cache_salt, images).
func (c *prefixCache) serve(scope []byte, units []uint32) int {
	n := len(units)
	if n == 0 {
		return 0
	}
	var h maphash.Hash
	h.SetSeed(c.seed)
	_, _ = h.Write(scope)
	parent := h.Sum64()
	limit := (n - 1) / PrefixBlockSize * PrefixBlockSize
	hits, missed := 0, false
	var buf [8]byte
	for start := 0; start+PrefixBlockSize <= n; start += PrefixBlockSize {
		h.Reset() // the seed stays
		binary.LittleEndian.PutUint64(buf[:], parent)
		_, _ = h.Write(buf[:])
		for _, u := range units[start : start+PrefixBlockSize] {
			binary.LittleEndian.PutUint32(buf[:4], u)
			_, _ = h.Write(buf[:4])
		}
		parent = h.Sum64()
		if _, hit := c.blocks.get(parent); hit && !missed {
			hits += PrefixBlockSize
		} else {
			missed = true
			c.blocks.put(parent, struct{}{})
		}
	}
	return min(hits, limit)
}

func (c *prefixCache) reset() { c.blocks.reset() }

// cacheScope is what isolates a prompt's cached blocks: the model, the
// cache_salt and the image hashes.
func cacheScope(model string, req *workerRequest) []byte {
	var b bytes.Buffer
	b.WriteString(model)
	b.WriteByte(0)
	b.WriteString(req.CacheSalt)
	for _, mm := range req.features().MMHashes.Image {
		b.WriteByte(0)
		b.WriteString(mm)
	}
	return b.Bytes()
}

// promptUnits are the tokens a prefix cache keys: the prompt's token IDs
// (a templated conversation's too), or, for a text prompt, one unit per four bytes of its JSON (the usage
// count of a text prompt).
func (req *workerRequest) promptUnits() []uint32 {
	if req.promptIDs != nil {
		return req.promptIDs
	}
	if req.templated != nil {
		return req.templated
	}
	text := req.promptText
	units := make([]uint32, 0, (len(text)+3)/4)
	for i := 0; i < len(text); i += 4 {
		var chunk [4]byte
		copy(chunk[:], text[i:])
		units = append(units, binary.LittleEndian.Uint32(chunk[:]))
	}
	if len(units) == 0 {
		units = append(units, 0) // promptTokens counts at least one
	}
	return units
}
