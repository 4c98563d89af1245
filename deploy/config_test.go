package deploy

import (
	"encoding/json"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/coordinator-project/coordinator/service/config"
)

// Where the coordinator container reads its config.
const (
	configMountPath = "/config/coordinator"
	configKey       = "coordinator.yaml"
)

// TestConfigMapIsTheSample checks the rendered ConfigMap holds the annotated
// sample byte for byte (the base includes config/coordinator as a resource).
func TestConfigMapIsTheSample(t *testing.T) {
	t.Parallel()
	sample, err := os.ReadFile(filepath.Join("..", "config", "coordinator", configKey))
	require.NoError(t, err)
	cm := configMap(t, rendered(t, dirBase), "coordinator-config")
	assert.Equal(t, string(sample), cm.Data[configKey])
}

// containerEnv is the lookup the coordinator gets in its container: the
// literal env values of the Deployment (valueFrom entries are resolved by
// the kubelet and are never COORDINATOR_ keys here).
func containerEnv(c corev1.Container) func(string) (string, bool) {
	return func(key string) (string, bool) {
		for _, e := range c.Env {
			if e.Name == key && e.ValueFrom == nil {
				return e.Value, true
			}
		}
		return "", false
	}
}

// effectiveConfig loads the rendered ConfigMap the coordinator Deployment
// mounts, with the Deployment's environment, through the coordinator's own
// loader.
func effectiveConfig(t *testing.T, m manifests) (config.Config, *appsv1.Deployment) {
	t.Helper()
	d := one[appsv1.Deployment](t, m, coordinatorName)
	c := container(t, d, coordinatorName)
	cm := configMap(t, m, "coordinator-config")

	// The container reads --config from the mounted ConfigMap.
	require.Equal(t, []string{"--config", configMountPath + "/" + configKey}, c.Args)
	var volume string
	for _, vm := range c.VolumeMounts {
		if vm.MountPath == configMountPath {
			volume = vm.Name
		}
	}
	require.NotEmpty(t, volume, "nothing mounted at %s", configMountPath)
	i := slices.IndexFunc(d.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == volume })
	require.GreaterOrEqual(t, i, 0)
	require.NotNil(t, d.Spec.Template.Spec.Volumes[i].ConfigMap)
	assert.Equal(t, cm.Name, d.Spec.Template.Spec.Volumes[i].ConfigMap.Name, "the Deployment mounts the generated (hashed) ConfigMap")

	data, ok := cm.Data[configKey]
	require.True(t, ok, "ConfigMap %s has no %s", cm.Name, configKey)
	cfg, err := config.Parse([]byte(data), containerEnv(c))
	require.NoError(t, err, "%s: the rendered config does not load", m.dir)
	require.NoError(t, cfg.Validate())
	return cfg, d
}

// servicePort reports whether a Service named host exposes port.
func servicePort(m manifests, host string, port int32) *corev1.Service {
	for _, s := range all[corev1.Service](m) {
		if s.Name != host {
			continue
		}
		for _, p := range s.Spec.Ports {
			if p.Port == port {
				return s
			}
		}
	}
	return nil
}

// hostPort splits a URL's host and port (80 for http without one).
func hostPort(t *testing.T, raw string) (string, int32) {
	t.Helper()
	u, err := url.Parse(raw)
	require.NoError(t, err)
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	n, err := net.LookupPort("tcp", port)
	require.NoError(t, err)
	return u.Hostname(), int32(n)
}

// The rendered config loads with the coordinator's loader, and every
// address in it names something the overlay deploys.
func TestRenderedConfigLoadsAndPointsInCluster(t *testing.T) {
	t.Parallel()
	for _, dir := range overlays {
		t.Run(dir, func(t *testing.T) {
			t.Parallel()
			m := rendered(t, dir)
			cfg, d := effectiveConfig(t, m)
			c := container(t, d, coordinatorName)

			// gateway.address is the internal Gateway, through its alias
			// Service.
			host, port := hostPort(t, cfg.Gateway.Address)
			gw := servicePort(m, host, port)
			require.NotNil(t, gw, "gateway.address %s: no Service %s with port %d", cfg.Gateway.Address, host, port)
			assert.Equal(t, map[string]string{"gateway.networking.k8s.io/gateway-name": internalGateway}, gw.Spec.Selector)

			// render.address is the render Service.
			var renders int
			for _, s := range cfg.Pipeline.Steps {
				if s.Type != "render" {
					continue
				}
				renders++
				addr, _ := s.Params["address"].(string)
				host, port := hostPort(t, addr)
				assert.NotNil(t, servicePort(m, host, port), "render.address %s: no Service %s with port %d", addr, host, port)
			}
			assert.Equal(t, 1, renders)

			// The listeners are the container's ports.
			for addr, name := range map[string]string{cfg.Server.ListenAddr: "http", cfg.Server.GRPCListenAddr: "grpc"} {
				_, p, err := net.SplitHostPort(addr)
				require.NoError(t, err)
				n, err := net.LookupPort("tcp", p)
				require.NoError(t, err)
				assert.Equal(t, int32(n), containerPort(t, c, name), "%s listener", name)
			}

			// The kubelet waits for the drain: preStop sleep, then up to
			// shutdown_timeout, then exit.
			require.NotNil(t, d.Spec.Template.Spec.TerminationGracePeriodSeconds)
			grace := time.Duration(*d.Spec.Template.Spec.TerminationGracePeriodSeconds) * time.Second
			var preStop time.Duration
			if c.Lifecycle != nil && c.Lifecycle.PreStop != nil && c.Lifecycle.PreStop.Sleep != nil {
				preStop = time.Duration(c.Lifecycle.PreStop.Sleep.Seconds) * time.Second
			}
			assert.Greater(t, grace, preStop+cfg.Server.ShutdownTimeout,
				"terminationGracePeriodSeconds must exceed preStop (%s) + server.shutdown_timeout (%s)", preStop, cfg.Server.ShutdownTimeout)
		})
	}
}

// vLLM's name for each coordinator connector: what --kv-transfer-config and
// --ec-transfer-config must say for the coordinator's kv_transfer_params and
// ec_transfer_params to mean anything to the workers.
var (
	vllmKVConnector = map[string]string{
		"kv-nixl":           "NixlConnector",
		"kv-shared-storage": "SharedStorageConnector",
	}
	vllmECConnector = map[string]string{
		"ec-nixl":           "ECCPUConnector",
		"ec-shared-storage": "ECExampleConnector",
	}
)

// transferConfig is the JSON a vLLM container gets after flag.
func transferConfig(t *testing.T, c corev1.Container, flag string) map[string]any {
	t.Helper()
	args := append(slices.Clone(c.Command), c.Args...)
	for i, a := range args {
		var raw string
		switch {
		case a == flag && i+1 < len(args):
			raw = args[i+1]
		case strings.HasPrefix(a, flag+"="):
			raw = strings.TrimPrefix(a, flag+"=")
		default:
			continue
		}
		var cfg map[string]any
		require.NoError(t, json.Unmarshal([]byte(raw), &cfg), "%s %s", c.Name, flag)
		return cfg
	}
	return nil
}

// workers returns the worker Deployments of the pool by role.
func workers(t *testing.T, m manifests) map[string]*appsv1.Deployment {
	t.Helper()
	out := map[string]*appsv1.Deployment{}
	for _, d := range all[appsv1.Deployment](m) {
		labels := d.Spec.Template.Labels
		if labels["app.kubernetes.io/component"] != "inference-worker" {
			continue
		}
		role := labels["llm-d.ai/role"]
		require.NotEmpty(t, role, "worker %s has no llm-d.ai/role", d.Name)
		require.NotContains(t, out, role, "two %s Deployments", role)
		out[role] = d
	}
	return out
}

// The production coordinator's connectors are the ones its vLLM workers are
// started with.
func TestProductionConnectorsAgreeWithVLLM(t *testing.T) {
	t.Parallel()
	m := rendered(t, dirProduction)
	cfg, _ := effectiveConfig(t, m)
	ws := workers(t, m)
	require.Len(t, ws, 3)
	kv, ec := vllmKVConnector[cfg.Pipeline.KVConnector], vllmECConnector[cfg.Pipeline.ECConnector]
	require.NotEmpty(t, kv, "kv_connector %q has no vLLM counterpart", cfg.Pipeline.KVConnector)
	require.NotEmpty(t, ec, "ec_connector %q has no vLLM counterpart", cfg.Pipeline.ECConnector)

	vllm := func(role string) corev1.Container {
		d, ok := ws[role]
		require.True(t, ok, "no %s workers", role)
		return container(t, d, "vllm")
	}
	for _, role := range []string{"prefill", "decode"} {
		got := transferConfig(t, vllm(role), "--kv-transfer-config")
		require.NotNil(t, got, "%s: no --kv-transfer-config", role)
		assert.Equal(t, kv, got["kv_connector"], "%s kv_connector", role)
	}
	producer := transferConfig(t, vllm("encode"), "--ec-transfer-config")
	require.NotNil(t, producer, "encode: no --ec-transfer-config")
	assert.Equal(t, ec, producer["ec_connector"])
	assert.Equal(t, "ec_producer", producer["ec_role"])
	consumer := transferConfig(t, vllm("prefill"), "--ec-transfer-config")
	require.NotNil(t, consumer, "prefill: no --ec-transfer-config")
	assert.Equal(t, ec, consumer["ec_connector"])
	assert.Equal(t, "ec_consumer", consumer["ec_role"])
	if cfg.Pipeline.ECConnector == "ec-nixl" {
		extra, _ := producer["ec_connector_extra_config"].(map[string]any)
		assert.Equal(t, true, extra["ec_enable_nixl"], "ec-nixl needs NIXL transfers on the encoder")
	}
	assert.Nil(t, transferConfig(t, vllm("decode"), "--ec-transfer-config"), "decode takes no encoder outputs")
}

// Every vLLM container (workers and render) serves the one model of the
// overlay's model ConfigMap.
func TestProductionServesOneModel(t *testing.T) {
	t.Parallel()
	m := rendered(t, dirProduction)
	cm := configMap(t, m, "model")
	require.NotEmpty(t, cm.Data["MODEL_NAME"])
	var n int
	for _, d := range all[appsv1.Deployment](m) {
		for _, c := range d.Spec.Template.Spec.Containers {
			if len(c.Command) == 0 || c.Command[0] != "vllm" {
				continue
			}
			n++
			require.NotEmpty(t, c.Args, "%s", d.Name)
			assert.Equal(t, "$(MODEL_NAME)", c.Args[0], "%s serves another model", d.Name)
			i := slices.IndexFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "MODEL_NAME" })
			require.GreaterOrEqual(t, i, 0, "%s has no MODEL_NAME", d.Name)
			ref := c.Env[i].ValueFrom
			require.NotNil(t, ref)
			require.NotNil(t, ref.ConfigMapKeyRef)
			assert.Equal(t, cm.Name, ref.ConfigMapKeyRef.Name, "%s", d.Name)
			assert.Equal(t, "MODEL_NAME", ref.ConfigMapKeyRef.Key, "%s", d.Name)
		}
	}
	assert.Equal(t, 4, n, "encode, prefill, decode and render")
}
