package service

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

func TestRefuseDeclared(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		md     metadata.MD
		refuse bool
	}{
		{name: "no metadata", md: nil},
		{name: "no content-length", md: metadata.Pairs("x-request-id", "r1")},
		{name: "within the limit", md: metadata.Pairs("content-length", "100")},
		{name: "at the limit", md: metadata.Pairs("content-length", "105")},
		{name: "past the limit", md: metadata.Pairs("content-length", "106"), refuse: true},
		{name: "past the limit, key in another case", md: metadata.MD{"Content-Length": {"106"}}, refuse: true},
		{name: "not a length", md: metadata.Pairs("content-length", "many")},
		{name: "a later value past the limit", md: metadata.MD{"content-length": {"x", "1000"}}, refuse: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			if tc.md != nil {
				ctx = metadata.NewIncomingContext(ctx, tc.md)
			}
			err := refuseDeclared(ctx, declaredLimit(100), "r1")
			if !tc.refuse {
				assert.NoError(t, err)
				return
			}
			assert.Equal(t, codes.ResourceExhausted, status.Code(err))
			assert.Contains(t, err.Error(), "(request_id: r1)")
		})
	}
}

// TestRefuseDeclaredAllocatesNothing: every call passes the check, which
// reads the one key it needs, not a copy of the call's metadata.
func TestRefuseDeclaredAllocatesNothing(t *testing.T) {
	ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs(
		"x-forwarded-for", "10.0.0.1", "content-type", "application/json", "content-length", "100"))
	allocs := testing.AllocsPerRun(100, func() {
		if refuseDeclared(ctx, declaredLimit(100), "r1") != nil {
			t.Fatal("refused")
		}
	})
	// The one value found is copied (ValueFromIncomingContext); without
	// the key, nothing is.
	assert.LessOrEqual(t, allocs, 1.0)
	none := metadata.NewIncomingContext(context.Background(), metadata.Pairs("x-forwarded-for", "10.0.0.1"))
	assert.Zero(t, testing.AllocsPerRun(100, func() { _ = refuseDeclared(none, 100, "") }))
}
