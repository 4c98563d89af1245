package deploy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/resmap"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// Kustomizations the tests render; overlays are what operators apply.
const (
	dirBase       = "base"
	dirDev        = "overlays/dev"
	dirProduction = "overlays/production"
	dirMonitoring = "overlays/monitoring"
	dirCRDs       = "crds"
)

var overlays = []string{dirDev, dirProduction, dirMonitoring}

// Kinds without a Go type here: validated against their CRD schema instead.
const (
	kindInferencePool      = "InferencePool"
	kindInferenceObjective = "InferenceObjective"
)

// typed maps apiVersion/kind to a constructor of the Go type the object
// must decode into, strictly.
var typed = map[string]func() any{
	"v1/ConfigMap":      func() any { return new(corev1.ConfigMap) },
	"v1/Namespace":      func() any { return new(corev1.Namespace) },
	"v1/Service":        func() any { return new(corev1.Service) },
	"v1/ServiceAccount": func() any { return new(corev1.ServiceAccount) },
	"apps/v1/Deployment": func() any {
		return new(appsv1.Deployment)
	},
	"autoscaling/v2/HorizontalPodAutoscaler": func() any {
		return new(autoscalingv2.HorizontalPodAutoscaler)
	},
	"policy/v1/PodDisruptionBudget": func() any {
		return new(policyv1.PodDisruptionBudget)
	},
	"networking.k8s.io/v1/NetworkPolicy": func() any {
		return new(networkingv1.NetworkPolicy)
	},
	"rbac.authorization.k8s.io/v1/Role":        func() any { return new(rbacv1.Role) },
	"rbac.authorization.k8s.io/v1/RoleBinding": func() any { return new(rbacv1.RoleBinding) },
	"gateway.networking.k8s.io/v1/Gateway":     func() any { return new(gatewayv1.Gateway) },
	"gateway.networking.k8s.io/v1/HTTPRoute":   func() any { return new(gatewayv1.HTTPRoute) },
	"gateway.networking.k8s.io/v1/GRPCRoute":   func() any { return new(gatewayv1.GRPCRoute) },
	// The Prometheus Operator's kinds (overlays/monitoring): their Go types,
	// as the operator's CRDs are generated from them.
	"monitoring.coreos.com/v1/ServiceMonitor": func() any { return new(monitoringv1.ServiceMonitor) },
	"monitoring.coreos.com/v1/PodMonitor":     func() any { return new(monitoringv1.PodMonitor) },
	"monitoring.coreos.com/v1/PrometheusRule": func() any { return new(monitoringv1.PrometheusRule) },
}

// object is one rendered manifest.
type object struct {
	APIVersion string
	Kind       string
	Name       string
	Namespace  string
	// JSON is the object as kustomize rendered it.
	JSON []byte
	// Typed is the strictly decoded Go object (*appsv1.Deployment, ...), or
	// map[string]any for the CRD-schema kinds.
	Typed any
}

func (o object) String() string { return o.Kind + "/" + o.Name }

// manifests is everything one kustomization renders.
type manifests struct {
	dir  string
	objs []object
}

// builds renders each kustomization once for the whole test binary.
var builds = map[string]func() (manifests, error){
	dirBase:       sync.OnceValues(func() (manifests, error) { return build(dirBase) }),
	dirDev:        sync.OnceValues(func() (manifests, error) { return build(dirDev) }),
	dirProduction: sync.OnceValues(func() (manifests, error) { return build(dirProduction) }),
	dirMonitoring: sync.OnceValues(func() (manifests, error) { return build(dirMonitoring) }),
}

// rendered is the cached build of dir; a failed build fails t.
func rendered(t *testing.T, dir string) manifests {
	t.Helper()
	b, ok := builds[dir]
	require.True(t, ok, "no build for %s", dir)
	m, err := b()
	require.NoError(t, err, "kustomize build %s", dir)
	return m
}

// kustomizeMu serialises kustomize runs: kyaml parses its built-in OpenAPI
// schema into package globals on first use without a lock (a data race
// when two kustomizations build at once).
var kustomizeMu sync.Mutex

// kustomize runs `kustomize build dir` through the kustomize library.
func kustomize(dir string) (resmap.ResMap, error) {
	kustomizeMu.Lock()
	defer kustomizeMu.Unlock()
	return krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
}

// build runs `kustomize build dir` through the kustomize library (the same
// code as `kubectl apply -k`, default load restrictions) and decodes every
// object strictly.
func build(dir string) (manifests, error) {
	resources, err := kustomize(dir)
	if err != nil {
		return manifests{}, err
	}
	m := manifests{dir: dir}
	for _, r := range resources.Resources() {
		y, err := r.AsYAML()
		if err != nil {
			return manifests{}, fmt.Errorf("%s: %w", r.CurId(), err)
		}
		o, err := decodeObject(y)
		if err != nil {
			return manifests{}, fmt.Errorf("%s: %w", r.CurId(), err)
		}
		m.objs = append(m.objs, o)
	}
	return m, nil
}

// decodeObject decodes one YAML document into its Go type, rejecting
// duplicate keys and fields the type does not have.
func decodeObject(doc []byte) (object, error) {
	j, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return object{}, err
	}
	var head struct {
		APIVersion string            `json:"apiVersion"`
		Kind       string            `json:"kind"`
		Metadata   metav1.ObjectMeta `json:"metadata"`
	}
	if err := json.Unmarshal(j, &head); err != nil {
		return object{}, err
	}
	o := object{APIVersion: head.APIVersion, Kind: head.Kind, Name: head.Metadata.Name, Namespace: head.Metadata.Namespace, JSON: j}
	if o.Kind == kindInferencePool || o.Kind == kindInferenceObjective {
		var meta struct {
			Metadata json.RawMessage `json:"metadata"`
		}
		if err := json.Unmarshal(j, &meta); err != nil {
			return object{}, err
		}
		if err := decodeStrict(meta.Metadata, new(metav1.ObjectMeta)); err != nil {
			return object{}, fmt.Errorf("metadata: %w", err)
		}
		var u map[string]any
		if err := json.Unmarshal(j, &u); err != nil {
			return object{}, err
		}
		o.Typed = u
		return o, nil
	}
	newT, ok := typed[o.APIVersion+"/"+o.Kind]
	if !ok {
		return object{}, fmt.Errorf("no Go type for %s %s", o.APIVersion, o.Kind)
	}
	o.Typed = newT()
	if err := decodeStrict(j, o.Typed); err != nil {
		return object{}, err
	}
	return o, nil
}

// decodeStrict is json.Unmarshal that fails on unknown fields and trailing
// data.
func decodeStrict(j []byte, into any) error {
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.DisallowUnknownFields()
	if err := dec.Decode(into); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("trailing data after the object")
	}
	return nil
}

// splitYAML splits a multi-document YAML file, dropping empty documents.
func splitYAML(data []byte) [][]byte {
	var docs [][]byte
	for doc := range strings.SplitSeq(string(data), "\n---") {
		doc = strings.TrimPrefix(doc, "---")
		if strings.TrimSpace(stripComments(doc)) != "" {
			docs = append(docs, []byte(doc))
		}
	}
	return docs
}

func stripComments(doc string) string {
	var b strings.Builder
	for line := range strings.SplitSeq(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "#") {
			b.WriteString(line)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// all returns the decoded objects of kind K.
func all[K any](m manifests) []*K {
	var out []*K
	for _, o := range m.objs {
		if v, ok := o.Typed.(*K); ok {
			out = append(out, v)
		}
	}
	return out
}

// one returns the object of type K named name; it fails t when there is none.
func one[K any](t *testing.T, m manifests, name string) *K {
	t.Helper()
	for _, o := range m.objs {
		if v, ok := o.Typed.(*K); ok && o.Name == name {
			return v
		}
	}
	require.Failf(t, "object not rendered", "%s: no %T named %q", m.dir, new(K), name)
	return nil
}

// unstructured returns the CRD-schema objects of kind.
func unstructured(m manifests, kind string) []object {
	var out []object
	for _, o := range m.objs {
		if o.Kind == kind {
			out = append(out, o)
		}
	}
	return out
}

// configMap returns the generated ConfigMap whose name starts with base
// (kustomize appends a content hash).
func configMap(t *testing.T, m manifests, base string) *corev1.ConfigMap {
	t.Helper()
	var found []*corev1.ConfigMap
	for _, cm := range all[corev1.ConfigMap](m) {
		if strings.HasPrefix(cm.Name, base+"-") {
			found = append(found, cm)
		}
	}
	require.Len(t, found, 1, "%s: generated ConfigMap %s", m.dir, base)
	return found[0]
}

// container returns the named container of a Deployment.
func container(t *testing.T, d *appsv1.Deployment, name string) corev1.Container {
	t.Helper()
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name == name {
			return c
		}
	}
	require.Failf(t, "no container", "deployment %s has no container %q", d.Name, name)
	return corev1.Container{}
}

// containerPort returns the number of a named container port.
func containerPort(t *testing.T, c corev1.Container, name string) int32 {
	t.Helper()
	for _, p := range c.Ports {
		if p.Name == name {
			return p.ContainerPort
		}
	}
	require.Failf(t, "no port", "container %s has no port %q", c.Name, name)
	return 0
}

// Every kustomization renders, and every rendered object decodes strictly
// into its Go type (or is a CRD kind validated against its schema).
func TestKustomizationsRenderStrictly(t *testing.T) {
	t.Parallel()
	for _, dir := range []string{dirBase, dirDev, dirProduction, dirMonitoring} {
		t.Run(dir, func(t *testing.T) {
			t.Parallel()
			m := rendered(t, dir)
			assert.NotEmpty(t, m.objs)
			seen := map[string]bool{}
			for _, o := range m.objs {
				key := o.APIVersion + "/" + o.Kind + "/" + o.Name
				assert.False(t, seen[key], "%s rendered twice", key)
				seen[key] = true
			}
		})
	}
}

// Every overlay puts everything in its own namespace, RoleBinding subjects
// included.
func TestOverlaysAreNamespaced(t *testing.T) {
	t.Parallel()
	for _, dir := range overlays {
		t.Run(dir, func(t *testing.T) {
			t.Parallel()
			m := rendered(t, dir)
			ns := all[corev1.Namespace](m)
			require.Len(t, ns, 1)
			for _, o := range m.objs {
				if o.Kind != "Namespace" {
					assert.Equal(t, ns[0].Name, o.Namespace, "%s", o)
				}
			}
			for _, rb := range all[rbacv1.RoleBinding](m) {
				for _, s := range rb.Subjects {
					assert.Equal(t, ns[0].Name, s.Namespace, "RoleBinding %s subject %s", rb.Name, s.Name)
				}
			}
		})
	}
}

// The CRD kustomization renders the two CRDs the tests validate against.
func TestCRDsRender(t *testing.T) {
	t.Parallel()
	resources, err := kustomize(dirCRDs)
	require.NoError(t, err)
	var names []string
	for _, r := range resources.Resources() {
		assert.Equal(t, "CustomResourceDefinition", r.GetKind())
		names = append(names, r.GetName())
	}
	assert.ElementsMatch(t, []string{"inferencepools.inference.networking.k8s.io", "inferenceobjectives.llm-d.ai"}, names)
}

// Every manifest file, patches included, decodes strictly on its own: a
// misspelt field in a patch fails here even where kustomize would carry it
// along.
func TestManifestFilesDecodeStrictly(t *testing.T) {
	t.Parallel()
	notManifests := map[string]bool{
		"kustomization.yaml": true, // kustomize's own
		"coordinator.yaml":   true, // the coordinator config (config_test.go)
		"epp-config.yaml":    true, // the EPP config (epp_test.go)
	}
	var files []string
	for _, root := range []string{dirBase, "overlays"} {
		require.NoError(t, filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() && strings.HasSuffix(path, ".yaml") && !notManifests[d.Name()] {
				files = append(files, path)
			}
			return err
		}))
	}
	require.NotEmpty(t, files)
	for _, path := range files {
		t.Run(path, func(t *testing.T) {
			t.Parallel()
			data, err := os.ReadFile(path)
			require.NoError(t, err)
			docs := splitYAML(data)
			require.NotEmpty(t, docs)
			for i, doc := range docs {
				_, err := decodeObject(doc)
				assert.NoError(t, err, "document %d", i)
			}
		})
	}
}

// The decoder is as strict as the tests rely on.
func TestDecodeObjectRejects(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		doc  string
		want string
	}{
		{
			name: "unknown field",
			doc:  "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\nspec:\n  replica: 2\n",
			want: `unknown field "replica"`,
		},
		{
			name: "misplaced field",
			doc:  "apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec:\n  ports:\n    - port: 80\n      containerPort: 80\n",
			want: `unknown field "containerPort"`,
		},
		{
			name: "duplicate key",
			doc:  "apiVersion: v1\nkind: Service\nmetadata: {name: x}\nmetadata: {name: y}\n",
			want: `key "metadata" already set`,
		},
		{
			name: "wrong type",
			doc:  "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {name: x}\nspec:\n  rules: {}\n",
			want: "cannot unmarshal",
		},
		{
			name: "unknown kind",
			doc:  "apiVersion: v1\nkind: Secret\nmetadata: {name: x}\n",
			want: "no Go type for v1 Secret",
		},
		{
			name: "unknown metadata field of a CRD kind",
			doc:  "apiVersion: inference.networking.k8s.io/v1\nkind: InferencePool\nmetadata: {name: x, label: {}}\n",
			want: `unknown field "label"`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := decodeObject([]byte(tt.doc))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}
