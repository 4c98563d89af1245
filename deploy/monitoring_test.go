package deploy

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

// The Prometheus Operator CRDs are not in deploy/crds or shared/k8s/crds:
// its objects decode strictly into the operator's own Go types (the CRDs
// are generated from them), and these tests check what they point at.

// The ServiceMonitor scrapes the coordinator Service's REST port; the
// PodMonitor the EPP pods' metrics port, which their NetworkPolicy leaves
// open.
func TestMonitorsSelectWhatTheyScrape(t *testing.T) {
	t.Parallel()
	m := rendered(t, dirMonitoring)
	sm := one[monitoringv1.ServiceMonitor](t, m, "coordinator")
	sel, err := metav1.LabelSelectorAsSelector(&sm.Spec.Selector)
	require.NoError(t, err)
	svc := one[corev1.Service](t, m, "coordinator")
	assert.True(t, sel.Matches(labels.Set(svc.Labels)), "the ServiceMonitor selects the coordinator Service")
	require.Len(t, sm.Spec.Endpoints, 1)
	ep := sm.Spec.Endpoints[0]
	assert.Equal(t, "/metrics", ep.Path)
	var port *corev1.ServicePort
	for i := range svc.Spec.Ports {
		if svc.Spec.Ports[i].Name == ep.Port {
			port = &svc.Spec.Ports[i]
		}
	}
	require.NotNil(t, port, "the Service has port %q", ep.Port)
	assert.Equal(t, int32(8080), port.Port, "/metrics is on the REST port")

	pm := one[monitoringv1.PodMonitor](t, m, "epp")
	sel, err = metav1.LabelSelectorAsSelector(&pm.Spec.Selector)
	require.NoError(t, err)
	epp := one[appsv1.Deployment](t, m, "epp")
	assert.True(t, sel.Matches(labels.Set(epp.Spec.Template.Labels)), "the PodMonitor selects the EPP pods")
	require.Len(t, pm.Spec.PodMetricsEndpoints, 1)
	require.NotNil(t, pm.Spec.PodMetricsEndpoints[0].Port)
	metricsPort := containerPort(t, container(t, epp, "epp"), *pm.Spec.PodMetricsEndpoints[0].Port)
	// Prometheus runs elsewhere; the rule for the metrics port names no peer.
	eppSrc := peer{labels: labels.Set{"app.kubernetes.io/name": "prometheus"}}
	eppDst := peer{labels: epp.Spec.Template.Labels}
	assert.True(t, allowed(t, all[networkingv1.NetworkPolicy](m), eppSrc, eppDst, metricsPort), "a scraper reaches the EPP's metrics port")
	assert.Contains(t, container(t, epp, "epp").Args, "--metrics-endpoint-auth=false", "the PodMonitor sends no token")
}

// The rules carry the four alerts the runbook names, each with a severity
// and a summary, and pass `promtool check rules` where promtool is
// installed (.ci/test-deps installs it for CI).
func TestPrometheusRuleAlerts(t *testing.T) {
	t.Parallel()
	rule := one[monitoringv1.PrometheusRule](t, rendered(t, dirMonitoring), "coordinator")
	var alerts []string
	for _, g := range rule.Spec.Groups {
		for _, r := range g.Rules {
			alerts = append(alerts, r.Alert)
			assert.NotEmpty(t, r.Labels["severity"], r.Alert)
			assert.NotEmpty(t, r.Annotations["summary"], r.Alert)
			assert.Contains(t, r.Expr.String(), "coordinator_", r.Alert)
		}
	}
	assert.ElementsMatch(t, []string{"CoordinatorHighErrorRatio", "CoordinatorTTFTHigh", "CoordinatorOverloaded", "CoordinatorPrefillFallbacks"}, alerts)

	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("promtool is not installed: .ci/test-deps installs Debian's prometheus package")
		}
		t.Skip("promtool not installed (apt-get install prometheus)")
	}
	rules, err := yaml.Marshal(map[string]any{"groups": rule.Spec.Groups})
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "rules.yaml")
	require.NoError(t, os.WriteFile(path, rules, 0o600))
	out, err := exec.CommandContext(t.Context(), promtool, "check", "rules", path).CombinedOutput()
	assert.NoError(t, err, "promtool check rules:\n%s", out)
}

// The dashboard ships as a ConfigMap for Grafana's sidecar, and every
// panel queries something.
func TestDashboardConfigMap(t *testing.T) {
	t.Parallel()
	cm := configMap(t, rendered(t, dirMonitoring), "coordinator-dashboard")
	assert.Equal(t, "1", cm.Labels["grafana_dashboard"])
	raw, ok := cm.Data["coordinator-dashboard.json"]
	require.True(t, ok)
	var dash struct {
		UID    string `json:"uid"`
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	require.NoError(t, json.Unmarshal([]byte(raw), &dash))
	assert.Equal(t, "coordinator", dash.UID)
	require.NotEmpty(t, dash.Panels)
	for _, p := range dash.Panels {
		require.NotEmpty(t, p.Targets, p.Title)
		for _, tg := range p.Targets {
			assert.True(t, strings.Contains(tg.Expr, "coordinator_"), "%s: %q", p.Title, tg.Expr)
		}
	}
}
