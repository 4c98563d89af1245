package service

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"google.golang.org/grpc/metadata"

	"github.com/coordinator-project/coordinator/internal/headers"
)

// TestRequestIDs pins compat D25: the client's id names the request, and
// its legs carry one unique to it.
func TestRequestIDs(t *testing.T) {
	t.Parallel()
	withHeader := func(v string) context.Context {
		return metadata.NewIncomingContext(context.Background(), metadata.Pairs("x-request-id", v))
	}
	tests := []struct {
		name        string
		ctx         context.Context
		fromMessage string
		onLegs      bool   // server.client_request_id_on_legs
		id          string // "" when made here
		unique      bool   // the legs carry id made unique, else id as it is
	}{
		{name: "message id", ctx: context.Background(), fromMessage: "abc", id: "abc", unique: true},
		{name: "header id", ctx: withHeader("hdr-1"), id: "hdr-1", unique: true},
		{name: "message id wins", ctx: withHeader("hdr-1"), fromMessage: "msg-1", id: "msg-1", unique: true},
		{name: "verbatim switch", ctx: withHeader("hdr-1"), onLegs: true, id: "hdr-1"},
		{name: "verbatim switch, message id", ctx: context.Background(), fromMessage: "abc", onLegs: true, id: "abc"},
		{name: "no id: made here, unique already", ctx: context.Background()},
		{name: "invalid header id: made here", ctx: withHeader("a b")},
		{name: "made by the REST front", ctx: headers.WithMintedRequestID(context.Background()),
			fromMessage: "0b8f8a6e-7a43-4c59-9d0b-2f4f6f0f8e21", id: "0b8f8a6e-7a43-4c59-9d0b-2f4f6f0f8e21"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := &Coordinator{clientIDOnLegs: tt.onLegs}
			id, legID := c.requestIDs(tt.ctx, tt.fromMessage)
			if tt.id == "" {
				assert.Len(t, id, 36, "a fresh UUID")
			} else {
				assert.Equal(t, tt.id, id)
			}
			assert.True(t, headers.ValidRequestID(legID), legID)
			if !tt.unique {
				assert.Equal(t, id, legID)
				return
			}
			assert.NotEqual(t, id, legID)
			assert.True(t, headers.IsLegRequestID(legID, id), legID)
			_, again := c.requestIDs(tt.ctx, tt.fromMessage)
			assert.NotEqual(t, legID, again, "each request its own")
		})
	}
}
