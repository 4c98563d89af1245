package procs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Build compiles the coordinator and the simulator into dir and returns
// their paths. It runs go build in the module holding the working
// directory.
func Build(ctx context.Context, dir string) (coordinator, sim string, err error) {
	gomod, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(gomod))
	if mod == "" || mod == os.DevNull {
		return "", "", errors.New("run from inside the coordinator module")
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-o", dir+string(filepath.Separator),
		"./cmd/coordinator", "./cmd/coordinator-sim")
	cmd.Dir = filepath.Dir(mod)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("go build: %w\n%s", err, out)
	}
	return filepath.Join(dir, "coordinator"), filepath.Join(dir, "coordinator-sim"), nil
}
