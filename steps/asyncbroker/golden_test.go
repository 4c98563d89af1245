package asyncbroker_test

import (
	"flag"
	"testing"

	"github.com/coordinator-project/coordinator/steps/steptest"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// goldenJSON compares a JSON wire body with testdata/<name>.json
// semantically (steptest.GoldenJSON; -update rewrites it).
func goldenJSON(t *testing.T, name string, got []byte) {
	t.Helper()
	steptest.GoldenJSON(t, name, got, *update)
}
