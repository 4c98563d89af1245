package main

import (
	"encoding/json"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/coordinator-project/coordinator/sim"
)

// The files whose PromQL must name only metrics the coordinator serves.
const (
	dashboardFile = "../../deploy/overlays/monitoring/coordinator-dashboard.json"
	rulesFile     = "../../deploy/overlays/monitoring/prometheusrule.yaml"
)

// metricName finds the metric names in a PromQL expression: the
// coordinator's, gRPC's, Go's and the process's (label names, functions
// and keywords do not start so).
var metricName = regexp.MustCompile(`\b(?:coordinator|grpc_server|go|process)_[a-zA-Z0-9_:]*`)

// dashboardQueries is every expr of the dashboard and the alert rules,
// keyed by where it is.
func dashboardQueries(t *testing.T) map[string]string {
	t.Helper()
	queries := map[string]string{}
	raw, err := os.ReadFile(dashboardFile)
	require.NoError(t, err)
	var dash struct {
		Panels []struct {
			Title   string                         `json:"title"`
			Targets []struct{ Expr, RefID string } `json:"targets"`
		} `json:"panels"`
	}
	require.NoError(t, json.Unmarshal(raw, &dash))
	for _, p := range dash.Panels {
		for i, tg := range p.Targets {
			queries["dashboard "+p.Title+" #"+string(rune('A'+i))] = tg.Expr
		}
	}
	raw, err = os.ReadFile(rulesFile)
	require.NoError(t, err)
	var rule struct {
		Spec struct {
			Groups []struct {
				Rules []struct{ Alert, Expr string } `json:"rules"`
			} `json:"groups"`
		} `json:"spec"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &rule))
	for _, g := range rule.Spec.Groups {
		for _, r := range g.Rules {
			queries["alert "+r.Alert] = r.Expr
		}
	}
	require.NotEmpty(t, queries)
	return queries
}

// TestDashboardQueriesExistingMetrics: every metric the Grafana dashboard
// and the alert rules query is in the coordinator's /metrics after a
// request of each kind (a misspelt or renamed metric shows an empty panel
// and an alert that never fires).
func TestDashboardQueriesExistingMetrics(t *testing.T) {
	t.Parallel()
	_, gw, render := startSim(t, sim.Options{})
	st := startStack(t, gw, render, fullPipeline)
	for _, body := range []string{chatBody, `{"model":"sim-model","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`} {
		resp := st.post(t, "/v1/chat/completions", body, nil)
		require.Equal(t, http.StatusOK, resp.StatusCode, readAll(t, resp.Body))
	}
	resp, err := st.client.Get(st.restURL + "/metrics")
	require.NoError(t, err)
	served := map[string]bool{}
	for _, line := range strings.Split(readAll(t, resp.Body), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, _, _ := strings.Cut(line, "{")
		name, _, _ = strings.Cut(name, " ")
		served[name] = true
	}
	for where, expr := range dashboardQueries(t) {
		names := metricName.FindAllString(expr, -1)
		assert.NotEmpty(t, names, "%s queries no coordinator metric: %s", where, expr)
		for _, name := range names {
			assert.True(t, served[name], "%s queries %s, which /metrics does not serve", where, name)
		}
	}
}
