package frontdoor_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/internal/frontdoor"
	"github.com/coordinator-project/coordinator/internal/requestbody"
	"github.com/coordinator-project/coordinator/internal/wire/legs"
)

func TestANetworkCallHasNoCall(t *testing.T) {
	ctx := context.Background()
	assert.Equal(t, frontdoor.GRPC, frontdoor.Of(ctx))
	assert.Equal(t, "grpc", frontdoor.Of(ctx).String())
	assert.False(t, frontdoor.Checked(ctx))
	assert.Nil(t, frontdoor.ParsedBody(ctx, []byte(`{}`), legs.FormatChat))
}

func TestTheFrontsCallCarriesItsParse(t *testing.T) {
	body := []byte(`{"model":"m","messages":[]}`)
	doc, err := requestbody.Parse(body, legs.FormatChat)
	require.NoError(t, err)
	call := &frontdoor.Call{Doc: doc}
	ctx := frontdoor.With(context.Background(), call)

	assert.Equal(t, frontdoor.REST, frontdoor.Of(ctx))
	assert.Equal(t, "rest", frontdoor.Of(ctx).String())
	assert.True(t, frontdoor.Checked(ctx))
	assert.Same(t, doc, frontdoor.ParsedBody(ctx, body, legs.FormatChat), "the very bytes parsed, for their format")
	assert.Nil(t, frontdoor.ParsedBody(ctx, []byte(string(body)), legs.FormatChat), "equal bytes elsewhere are another body")
	assert.Nil(t, frontdoor.ParsedBody(ctx, body, legs.FormatCompletions), "another format")
}

func TestACallWithoutParseIsNotChecked(t *testing.T) {
	ctx := frontdoor.With(context.Background(), &frontdoor.Call{})
	assert.Equal(t, frontdoor.REST, frontdoor.Of(ctx))
	assert.False(t, frontdoor.Checked(ctx), "the service validates what the front did not")
}
