package deploy

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
)

// instruction is one Dockerfile instruction with its arguments, line
// continuations joined.
type instruction struct {
	cmd  string // upper-case: FROM, RUN, ...
	args string
}

// stage is one FROM and what follows it.
type stage struct {
	image string
	name  string
	ins   []instruction
}

// parseDockerfile splits a Dockerfile into stages. It knows comments, line
// continuations and `FROM [--platform=...] image [AS name]`; enough to check
// the file's shape without a container engine.
func parseDockerfile(t *testing.T, data string) []stage {
	t.Helper()
	var stages []stage
	var logical strings.Builder
	flush := func() {
		line := strings.TrimSpace(logical.String())
		logical.Reset()
		if line == "" {
			return
		}
		cmd, args, _ := strings.Cut(line, " ")
		in := instruction{cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args)}
		if in.cmd == "FROM" {
			fields := strings.Fields(in.args)
			fields = slices.DeleteFunc(fields, func(f string) bool { return strings.HasPrefix(f, "--") })
			require.NotEmpty(t, fields, "FROM without an image")
			s := stage{image: fields[0]}
			if len(fields) == 3 && strings.EqualFold(fields[1], "AS") {
				s.name = fields[2]
			}
			stages = append(stages, s)
			return
		}
		if len(stages) == 0 {
			require.Equal(t, "ARG", in.cmd, "only ARG may precede the first FROM")
			return
		}
		stages[len(stages)-1].ins = append(stages[len(stages)-1].ins, in)
	}
	for raw := range strings.SplitSeq(data, "\n") {
		line := strings.TrimSpace(raw)
		if strings.HasPrefix(line, "#") {
			continue
		}
		if cont, ok := strings.CutSuffix(line, "\\"); ok {
			logical.WriteString(cont + " ")
			continue
		}
		logical.WriteString(line)
		flush()
	}
	flush()
	return stages
}

// execForm decodes a JSON-array (exec form) instruction argument.
func execForm(t *testing.T, args string) []string {
	t.Helper()
	var out []string
	require.NoError(t, json.Unmarshal([]byte(args), &out), "exec form: %s", args)
	return out
}

// The Dockerfile builds both binaries statically in a Go stage and ships
// them on distroless nonroot with the config path and both ports.
func TestDockerfile(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join("..", "Dockerfile"))
	require.NoError(t, err)
	text := string(data)
	stages := parseDockerfile(t, text)
	require.GreaterOrEqual(t, len(stages), 2, "multi-stage")

	build, final := stages[0], stages[len(stages)-1]
	assert.True(t, strings.HasPrefix(build.image, "golang:"), "build stage image %s", build.image)
	require.NotEmpty(t, build.name)
	assert.Equal(t, "gcr.io/distroless/static-debian12:nonroot", final.image)

	// The Go image's version is go.mod's.
	goMod, err := os.ReadFile(filepath.Join("..", "go.mod"))
	require.NoError(t, err)
	goLine := regexp.MustCompile(`(?m)^go (\S+)$`).FindSubmatch(goMod)
	require.NotNil(t, goLine)
	argLine := regexp.MustCompile(`(?m)^ARG GO_VERSION=(\S+)$`).FindStringSubmatch(text)
	require.NotNil(t, argLine, "ARG GO_VERSION")
	assert.Equal(t, string(goLine[1]), argLine[1], "Dockerfile GO_VERSION vs go.mod")
	assert.Equal(t, "golang:${GO_VERSION}", build.image)

	// Static: cgo off for every build, and both binaries built.
	var env, runs []string
	for _, in := range build.ins {
		switch in.cmd {
		case "ENV":
			env = append(env, in.args)
		case "RUN":
			runs = append(runs, in.args)
		}
	}
	assert.Contains(t, env, "CGO_ENABLED=0")
	var builds []string
	for _, run := range runs {
		for cmd := range strings.SplitSeq(run, "&&") {
			if !strings.Contains(cmd, "go build") {
				continue
			}
			builds = append(builds, cmd)
			assert.NotContains(t, cmd, "CGO_ENABLED=1")
			assert.NotContains(t, cmd, "-linkshared")
		}
	}
	for _, pkg := range []string{"./cmd/coordinator", "./cmd/coordinator-sim"} {
		assert.True(t, slices.ContainsFunc(builds, func(b string) bool { return strings.HasSuffix(strings.TrimSpace(b), " "+pkg) }), "no go build of %s", pkg)
		_, err := os.Stat(filepath.Join("..", pkg))
		assert.NoError(t, err, "%s does not exist", pkg)
	}

	// The final stage: binaries from the build stage, nonroot, ports,
	// entrypoint with the config path.
	var user, expose string
	var entrypoint, cmd []string
	var copies []string
	for _, in := range final.ins {
		switch in.cmd {
		case "USER":
			user = in.args
		case "EXPOSE":
			expose = in.args
		case "ENTRYPOINT":
			entrypoint = execForm(t, in.args)
		case "CMD":
			cmd = execForm(t, in.args)
		case "COPY":
			copies = append(copies, in.args)
		case "RUN":
			assert.Failf(t, "RUN in the final stage", "distroless has no shell: %s", in.args)
		}
	}
	assert.Equal(t, "nonroot", strings.Split(user, ":")[0])
	assert.ElementsMatch(t, []string{"8080", "9090"}, strings.Fields(expose))
	assert.Equal(t, []string{"/coordinator"}, entrypoint)
	assert.Equal(t, []string{"--config", "/config/coordinator/coordinator.yaml"}, cmd)
	assert.True(t, slices.ContainsFunc(copies, func(c string) bool {
		return strings.HasPrefix(c, "--from="+build.name+" ") && strings.Contains(c, "/coordinator ") && strings.Contains(c, "/coordinator-sim")
	}), "COPY --from=%s of both binaries", build.name)
}

// The sim Deployments of the dev overlay run the image's second binary.
func TestDevWorkersRunTheSimulator(t *testing.T) {
	t.Parallel()
	m := rendered(t, dirDev)
	ws := workers(t, m)
	require.Len(t, ws, 3)
	render := one[appsv1.Deployment](t, m, "rendering-service")
	for _, d := range append(mapsValues(ws), render) {
		c := d.Spec.Template.Spec.Containers[0]
		assert.Equal(t, []string{"/coordinator-sim"}, c.Command, d.Name)
		coordinator := container(t, one[appsv1.Deployment](t, m, coordinatorName), coordinatorName)
		assert.Equal(t, coordinator.Image, c.Image, "%s runs the coordinator image", d.Name)
		assert.Contains(t, c.Args, "--strict=false", "%s: legs of one request land on different pods", d.Name)
	}
}
