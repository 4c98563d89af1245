package builtin_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests when a goroutine outlives them: steps
// that fan out must not leave a leg running after Execute returns.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
