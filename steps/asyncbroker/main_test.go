package asyncbroker_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests when a goroutine outlives them: the
// step's waits, quota releases and notifier must end with it.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
