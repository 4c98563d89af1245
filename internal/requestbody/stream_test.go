package requestbody_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/internal/requestbody"
	"github.com/coordinator-project/coordinator/internal/wire/bodykeys"
	"github.com/coordinator-project/coordinator/internal/wire/legs"
)

// "stream" is read as vLLM's pydantic reads it, and decided once: the REST
// front and the service read one decision off one document.
func TestStreamIsDecidedOnce(t *testing.T) {
	for body, want := range map[string]bool{
		`{"stream":true}`: true, `{"stream":"yes"}`: true, `{"stream":1}`: true,
		`{"stream":false}`: false, `{"stream":"off"}`: false, `{}`: false, `{"stream":null}`: false,
	} {
		doc, err := requestbody.Parse([]byte(body), legs.FormatChat)
		require.NoError(t, err, body)
		got, err := doc.Stream()
		require.NoError(t, err, body)
		assert.Equal(t, want, got, body)
		doc.Root().Set(bodykeys.Stream, []byte(`"maybe"`)) // a later edit does not change the decision
		again, err := doc.Stream()
		require.NoError(t, err, body)
		assert.Equal(t, want, again, "%s: decided once", body)
	}

	doc, err := requestbody.Parse([]byte(`{"stream":"maybe"}`), legs.FormatChat)
	require.NoError(t, err)
	_, err = doc.Stream()
	require.ErrorIs(t, err, legs.ErrInvalidRequest)
	assert.Contains(t, err.Error(), "stream")
}
