package builtin_test

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/steps"
	"github.com/coordinator-project/coordinator/steps/steptest"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// goldenJSON compares a JSON wire body with testdata/<name>.json
// semantically (steptest.GoldenJSON; -update rewrites it).
func goldenJSON(t *testing.T, name string, got []byte) {
	t.Helper()
	steptest.GoldenJSON(t, name, got, *update)
}

// goldenWire compares a wire body with testdata/<name>.wire byte for byte:
// the body exactly as it went out, so a re-encoding (another spacing, key
// order or number spelling) fails where goldenJSON cannot see it. With
// -update it rewrites the file.
func goldenWire(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name+".wire")
	if *update {
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, got, 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "missing golden file: run go test ./steps -run %s -update", t.Name())
	assert.Equal(t, string(want), string(got), "golden %s differs byte for byte (run with -update and review the diff)", name)
}

// editedBody is the request's body as the steps left it: its document as
// it stands, or the client's body when no step read it.
func editedBody(rc *steps.RequestContext) []byte {
	if rc.Doc == nil {
		return rc.Body
	}
	return rc.Doc.Bytes()
}
