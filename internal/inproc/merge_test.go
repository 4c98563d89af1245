package inproc

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

func TestMergeLeavesTheCallersMetadata(t *testing.T) {
	t.Parallel()
	shared := metadata.Pairs("grpc-retry-pushback-ms", "1000")
	first := metadata.Pairs("x-request-id", "r1", "server-timing", "decode;dur=1.0")
	var dst metadata.MD
	dst = merge(dst, first)
	dst = merge(dst, shared)
	dst = merge(dst, metadata.Pairs("x-request-id", "r2"))
	dst = merge(dst, metadata.Pairs("grpc-retry-pushback-ms", "2000"))
	assert.Equal(t, metadata.MD{
		"x-request-id":           {"r1", "r2"},
		"server-timing":          {"decode;dur=1.0"},
		"grpc-retry-pushback-ms": {"1000", "2000"},
	}, dst)
	assert.Equal(t, metadata.Pairs("grpc-retry-pushback-ms", "1000"), shared)
	assert.Equal(t, metadata.Pairs("x-request-id", "r1", "server-timing", "decode;dur=1.0"), first)
	assert.Len(t, first["x-request-id"][:cap(first["x-request-id"])], 1, "nothing written past the caller's values")
	// The same md twice on one call: its values twice, as metadata.Join.
	twice := merge(merge(nil, shared), shared)
	assert.Equal(t, []string{"1000", "1000"}, twice["grpc-retry-pushback-ms"])
	assert.Equal(t, []string{"1000"}, shared["grpc-retry-pushback-ms"])
}

// TestMergeTakesValuesByReference: a header set in several steps costs
// one map, not a copy of each value.
func TestMergeTakesValuesByReference(t *testing.T) {
	a := metadata.Pairs("x-request-id", "r1")
	b := metadata.Pairs("server-timing", "decode;dur=1.0")
	c := metadata.Pairs("content-type", "application/json")
	allocs := testing.AllocsPerRun(100, func() {
		dst := merge(nil, a)
		dst = merge(dst, b)
		_ = merge(dst, c)
	})
	assert.LessOrEqual(t, allocs, 2.0) // the map (and its growth), no value slices
}

// TestDeliverHandsOverFinalMetadata: the call options get the handler's
// header and trailer themselves, without a copy, and what is set once the
// handler returned reaches neither.
func TestDeliverHandsOverFinalMetadata(t *testing.T) {
	var ts transportStream
	require.NoError(t, ts.SetHeader(metadata.Pairs("x-request-id", "r1")))
	require.NoError(t, ts.SetTrailer(metadata.Pairs("grpc-retry-pushback-ms", "1000")))
	var header, trailer metadata.MD
	opts := []grpc.CallOption{grpc.Header(&header), grpc.Trailer(&trailer)}
	allocs := testing.AllocsPerRun(1, func() { ts.deliver(opts) })
	assert.Zero(t, allocs)
	require.NoError(t, ts.SetHeader(metadata.Pairs("x-request-id", "late")))
	require.NoError(t, ts.SetTrailer(metadata.Pairs("x-late", "1")))
	assert.Equal(t, metadata.Pairs("x-request-id", "r1"), header)
	assert.Equal(t, metadata.Pairs("grpc-retry-pushback-ms", "1000"), trailer)
}
