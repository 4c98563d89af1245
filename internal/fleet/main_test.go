package fleet_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests when a goroutine outlives them: Run
// and Refresh start none that survive them.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
