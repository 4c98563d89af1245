package deploy

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The InferencePool and InferenceObjective of every build pass their CRD
// schemas, CEL rules included.
func TestInferenceObjectsMatchTheirCRDs(t *testing.T) {
	t.Parallel()
	crds, err := inferenceCRDs()
	require.NoError(t, err)
	for _, dir := range []string{dirBase, dirDev, dirProduction} {
		t.Run(dir, func(t *testing.T) {
			t.Parallel()
			m := rendered(t, dir)
			for _, kind := range []string{kindInferencePool, kindInferenceObjective} {
				objs := unstructured(m, kind)
				require.NotEmpty(t, objs, kind)
				for _, o := range objs {
					s, ok := crds[o.APIVersion+"/"+o.Kind]
					require.True(t, ok, "no CRD serves %s %s", o.APIVersion, o.Kind)
					assert.Empty(t, s.validate(o.JSON), "%s", o)
				}
			}
		})
	}
	for _, s := range crds {
		assert.Empty(t, s.skippedRules(), "%s rules the validator cannot evaluate", s.kind)
	}
}

// The Gateway API objects pass the schemas of the release whose Go types
// decoded them (standard channel: no experimental-only field slips in).
func TestGatewayObjectsMatchTheirCRDs(t *testing.T) {
	t.Parallel()
	crds, err := gatewayCRDs()
	require.NoError(t, err)
	for _, dir := range []string{dirBase, dirDev, dirProduction} {
		t.Run(dir, func(t *testing.T) {
			t.Parallel()
			m := rendered(t, dir)
			n := 0
			for _, o := range m.objs {
				if o.APIVersion != "gateway.networking.k8s.io/v1" {
					continue
				}
				s, ok := crds[o.APIVersion+"/"+o.Kind]
				require.True(t, ok, "no standard-channel CRD serves %s %s", o.APIVersion, o.Kind)
				assert.Empty(t, s.validate(o.JSON), "%s", o)
				n++
			}
			assert.Equal(t, 5, n, "two Gateways, two HTTPRoutes, one GRPCRoute")
		})
	}
	for _, s := range crds {
		if skipped := s.skippedRules(); len(skipped) > 0 {
			t.Logf("%s: %d CEL rules need Kubernetes' CEL libraries and were not evaluated", s.kind, len(skipped))
		}
	}
}

// The validator rejects what the API server would.
func TestCRDValidatorRejects(t *testing.T) {
	t.Parallel()
	inference, err := inferenceCRDs()
	require.NoError(t, err)
	gateway, err := gatewayCRDs()
	require.NoError(t, err)
	crds := crdSet{}
	maps.Copy(crds, inference)
	maps.Copy(crds, gateway)
	base := rendered(t, dirBase)
	pool := unstructured(base, kindInferencePool)[0]
	objective := unstructured(base, kindInferenceObjective)[0]
	var route object
	for _, o := range base.objs {
		if o.Kind == "HTTPRoute" && o.Name == "inference-internal" {
			route = o
		}
	}
	require.NotEmpty(t, route.JSON)

	tests := []struct {
		name   string
		obj    object
		mutate func(spec map[string]any)
		want   string
	}{
		{
			name:   "unknown field",
			obj:    pool,
			mutate: func(s map[string]any) { s["targetPort"] = 8000 },
			want:   ".spec.targetPort: unknown field",
		},
		{
			name:   "required field missing",
			obj:    pool,
			mutate: func(s map[string]any) { delete(s, "targetPorts") },
			want:   "targetPorts",
		},
		{
			name:   "enum",
			obj:    pool,
			mutate: func(s map[string]any) { s["appProtocol"] = "grpc" },
			want:   "appProtocol",
		},
		{
			name: "CEL: port numbers unique",
			obj:  pool,
			mutate: func(s map[string]any) {
				s["targetPorts"] = []any{map[string]any{"number": 8000}, map[string]any{"number": 8000}}
			},
			want: "port number must be unique",
		},
		{
			name: "CEL on a defaulted kind: a Service reference needs a port",
			obj:  pool,
			mutate: func(s map[string]any) {
				s["endpointPickerRef"] = map[string]any{"name": "epp"}
			},
			want: "port is required when kind is 'Service'",
		},
		{
			name:   "pattern",
			obj:    pool,
			mutate: func(s map[string]any) { s["selector"] = map[string]any{"matchLabels": map[string]any{"app": "-bad-"}} },
			want:   "matchLabels",
		},
		{
			name: "CEL in a Gateway API CRD: a Service backend needs a port",
			obj:  route,
			mutate: func(s map[string]any) {
				rules := s["rules"].([]any)
				backend := rules[len(rules)-1].(map[string]any)["backendRefs"].([]any)[0].(map[string]any)
				delete(backend, "port")
			},
			want: "Must have port for Service reference",
		},
		{
			name:   "objective without a pool",
			obj:    objective,
			mutate: func(s map[string]any) { delete(s, "poolRef") },
			want:   "poolRef",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var u map[string]any
			require.NoError(t, json.Unmarshal(tt.obj.JSON, &u))
			tt.mutate(u["spec"].(map[string]any))
			j, err := json.Marshal(u)
			require.NoError(t, err)
			errs := crds[tt.obj.APIVersion+"/"+tt.obj.Kind].validate(j)
			require.NotEmpty(t, errs)
			assert.Contains(t, joinLines(errs), tt.want)
		})
	}
}

// deploy/crds are copies of the shared CRDs; where shared/ sits beside the
// clone (this workspace, CI), they must not drift.
func TestCRDCopiesMatchShared(t *testing.T) {
	t.Parallel()
	shared := filepath.Join("..", "..", "shared", "k8s", "crds")
	if _, err := os.Stat(shared); err != nil {
		t.Skipf("no shared CRDs beside the clone: %v", err)
	}
	for _, name := range []string{"inference.networking.k8s.io_inferencepools.yaml", "llm-d.ai_inferenceobjectives.yaml"} {
		want, err := os.ReadFile(filepath.Join(shared, name))
		require.NoError(t, err)
		got, err := os.ReadFile(filepath.Join(dirCRDs, name))
		require.NoError(t, err)
		assert.Equal(t, string(want), string(got), "deploy/crds/%s differs from shared/k8s/crds: copy it again", name)
	}
}

func joinLines(lines []string) string {
	out := ""
	for _, l := range lines {
		out += l + "\n"
	}
	return out
}
