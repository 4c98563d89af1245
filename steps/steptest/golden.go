package steptest

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// GoldenJSON compares a JSON wire body with testdata/<name>.json
// semantically (key order aside); with update it rewrites the file,
// indented, for review as a diff. Each test package passes its own -update
// flag (a flag registered here would clash with theirs).
func GoldenJSON(t *testing.T, name string, got []byte, update bool) {
	t.Helper()
	path := filepath.Join("testdata", name+".json")
	if update {
		var pretty bytes.Buffer
		require.NoError(t, json.Indent(&pretty, got, "", "  "), "golden %s: body is not JSON", name)
		pretty.WriteByte('\n')
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, pretty.Bytes(), 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "missing golden file: run go test in this package with -run %s -update", t.Name())
	assert.JSONEq(t, string(want), string(got), "golden %s differs (run with -update and review the diff)", name)
}
