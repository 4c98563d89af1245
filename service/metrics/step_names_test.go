package metrics_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/coordinator-project/coordinator/service/metrics"
	"github.com/coordinator-project/coordinator/steps/builtin"
)

// The conditional-decode counter follows the built-in step's type.
func TestConditionalDecodeStepIsTheBuiltinType(t *testing.T) {
	assert.Equal(t, builtin.ConditionalDecodeType, metrics.ConditionalDecodeStep)
}
