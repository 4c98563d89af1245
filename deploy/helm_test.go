package deploy

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
)

// The chart, and how the tests render it: the helm pinned in tools/helm
// (its own module), the namespace the production overlay uses, the oldest
// Kubernetes the chart takes.
const (
	dirChart    = "helm/coordinator"
	helmModule  = "../tools/helm"
	chartFromGo = "../../deploy/helm/coordinator" // dirChart seen from helmModule
)

// helmTemplate renders the chart with extra helm flags (--set ...) and
// decodes every object strictly, as the kustomize builds are.
func helmTemplate(t *testing.T, flags ...string) manifests {
	t.Helper()
	args := append([]string{"-C", helmModule, "tool", "helm", "template", "coordinator", chartFromGo,
		"--namespace", "coordinator", "--kube-version", "1.30.0"}, flags...)
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(t.Context(), "go", args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "helm template %v:\n%s", flags, stderr.String())
	m := manifests{dir: "helm " + strings.Join(flags, " ")}
	for i, doc := range splitYAML(stdout.Bytes()) {
		// splitYAML cuts at "\n---": the document's last line break, which
		// a block scalar at its end keeps, is given back.
		o, err := decodeObject(append(doc, '\n'))
		require.NoError(t, err, "document %d:\n%s", i, doc)
		m.objs = append(m.objs, o)
	}
	require.NotEmpty(t, m.objs)
	return m
}

// helmDefault is the chart rendered with its default values, once.
var helmDefault struct {
	once sync.Once
	m    manifests
}

func helmDefaults(t *testing.T) manifests {
	t.Helper()
	helmDefault.once.Do(func() { helmDefault.m = helmTemplate(t) })
	require.NotEmpty(t, helmDefault.m.objs, "the default render failed")
	return helmDefault.m
}

// normalized is an object as JSON with the config ConfigMap's generated
// name suffix dropped (kustomize and helm hash different things).
func normalized(t *testing.T, o object, configName string) map[string]any {
	t.Helper()
	j, err := json.Marshal(o.Typed)
	require.NoError(t, err)
	j = bytes.ReplaceAll(j, []byte(`"`+configName+`"`), []byte(`"coordinator-config"`))
	var v map[string]any
	require.NoError(t, json.Unmarshal(j, &v))
	return v
}

// The chart's default values render the production overlay's coordinator
// objects, field for field: Deployment, Service, HPA, PDB, ServiceAccount
// and the config ConfigMap.
func TestHelmRendersTheProductionCoordinator(t *testing.T) {
	t.Parallel()
	chart, prod := helmDefaults(t), rendered(t, dirProduction)
	chartConfig, prodConfig := configMap(t, chart, "coordinator-config").Name, configMap(t, prod, "coordinator-config").Name
	find := func(m manifests, kind, name string) (object, bool) {
		for _, o := range m.objs {
			if o.Kind == kind && (o.Name == name || strings.HasPrefix(o.Name, name+"-")) {
				return o, true
			}
		}
		return object{}, false
	}
	var kinds []string
	for _, o := range chart.objs {
		kinds = append(kinds, o.Kind)
		want, ok := find(prod, o.Kind, strings.TrimSuffix(o.Name, strings.TrimPrefix(chartConfig, "coordinator-config")))
		if !assert.True(t, ok, "the chart renders %s, production has none", o) {
			continue
		}
		assert.Equal(t, normalized(t, want, prodConfig), normalized(t, o, chartConfig), "%s differs from production's", o)
	}
	assert.ElementsMatch(t, []string{"ServiceAccount", "ConfigMap", "Service", "Deployment", "HorizontalPodAutoscaler", "PodDisruptionBudget"}, kinds)
}

// The chart's copies of the sample config and the dashboard are the
// repository's: one source each.
func TestHelmCopiesAreTheOriginals(t *testing.T) {
	t.Parallel()
	for copyPath, original := range map[string]string{
		dirChart + "/files/coordinator.yaml":                "../config/coordinator/coordinator.yaml",
		dirChart + "/dashboards/coordinator-dashboard.json": dirMonitoring + "/coordinator-dashboard.json",
	} {
		want, err := os.ReadFile(original)
		require.NoError(t, err)
		got, err := os.ReadFile(copyPath)
		require.NoError(t, err)
		assert.Equal(t, string(want), string(got), "%s must be a copy of %s (cp it)", copyPath, original)
	}
}

// Every switch of the values renders objects that decode strictly and do
// what the value says: replicas without the HPA, TLS from a Secret,
// tracing by the OTEL_* variables, the monitoring objects equal to the
// monitoring overlay's.
func TestHelmValues(t *testing.T) {
	t.Parallel()
	m := helmTemplate(t, "--set", "autoscaling.enabled=false,replicas=4,tls.enabled=true,tls.clientAuth=require,"+
		"tracing.enabled=true,tracing.protocol=http/protobuf,tracing.endpoint=http://collector:4318,"+
		"monitoring.serviceMonitor.enabled=true,monitoring.prometheusRule.enabled=true,monitoring.dashboard.enabled=true,"+
		"image.tag=v9.9.9")
	assert.Empty(t, all[autoscalingv2.HorizontalPodAutoscaler](m), "autoscaling off: no HPA")
	cfg, d := effectiveConfig(t, m)
	require.NotNil(t, d.Spec.Replicas)
	assert.Equal(t, int32(4), *d.Spec.Replicas)
	c := container(t, d, coordinatorName)
	assert.Equal(t, "ghcr.io/coordinator-project/coordinator:v9.9.9", c.Image)
	assert.Equal(t, "/etc/coordinator/tls/tls.crt", cfg.Server.TLS.CertFile)
	assert.Equal(t, "require", cfg.Server.TLS.ClientAuth)
	assert.Equal(t, "kv-nixl", cfg.Pipeline.KVConnector)
	var secret *corev1.SecretVolumeSource
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Secret != nil {
			secret = v.Secret
		}
	}
	require.NotNil(t, secret)
	assert.Equal(t, "coordinator-tls", secret.SecretName)
	assert.Equal(t, corev1.URISchemeHTTPS, c.ReadinessProbe.HTTPGet.Scheme)
	env := containerEnv(c)
	for k, want := range map[string]string{
		"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318",
	} {
		got, _ := env(k)
		assert.Equal(t, want, got, k)
	}

	mon := rendered(t, dirMonitoring)
	assert.Equal(t, one[monitoringv1.PrometheusRule](t, mon, "coordinator").Spec, one[monitoringv1.PrometheusRule](t, m, "coordinator").Spec,
		"the chart's alerts are the monitoring overlay's")
	wantSM, gotSM := one[monitoringv1.ServiceMonitor](t, mon, "coordinator").Spec, one[monitoringv1.ServiceMonitor](t, m, "coordinator").Spec
	assert.Equal(t, wantSM.Selector, gotSM.Selector)
	assert.Equal(t, "https", string(*gotSM.Endpoints[0].Scheme), "TLS on: the scrape is https")
	assert.Equal(t, configMap(t, mon, "coordinator-dashboard").Data, one[corev1.ConfigMap](t, m, "coordinator-dashboard").Data)
	assert.NotEmpty(t, all[appsv1.Deployment](m))
}
