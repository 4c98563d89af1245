package ec_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/connectors/ec"
	"github.com/coordinator-project/coordinator/connectors/ec/ectest"
)

func TestSharedStorageContract(t *testing.T) {
	t.Parallel()
	ectest.Contract(t, ec.NewSharedStorage())
}

func TestSharedStorageName(t *testing.T) {
	t.Parallel()
	assert.Equal(t, "ec-shared-storage", ec.NewSharedStorage().Name())
	assert.Equal(t, ec.SharedStorageName, ec.Default)
}

func TestSharedStorageNoWireFields(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		fromEncode []string
	}{
		{"no answers", nil},
		{"descriptors", ectest.EncodeAnswers},
		{"conflicting descriptors", []string{`{"h1":{"a":1}}`, `{"h1":{"a":2}}`}},
		{"malformed answer", []string{`{"h1":`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := ec.NewSharedStorage().PrefillParams(answers(tc.fromEncode...))
			require.NoError(t, err)
			assert.Nil(t, got)
		})
	}
}
