package deploy

import (
	"bytes"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// helmControlOn is every control switch of the values on, with a port,
// a DNS entry and a setting of its own.
var helmControlOn = []string{"--set", "control.enabled=true,control.port=9191," +
	"control.token.existingSecret=rl-token,control.token.secretKey=bearer," +
	"control.tls.enabled=true,control.tls.secretName=rl-tls,control.tls.clientAuth=require," +
	"control.membership.dns[0].role=decode,control.membership.dns[0].name=extra-decode.other.svc,control.membership.dns[0].port=8001," +
	"control.membership.refreshInterval=30s,control.settings.concurrency=256"}

// helmTemplateFails renders the chart with flags, which must fail; it
// returns helm's error output.
func helmTemplateFails(t *testing.T, flags ...string) string {
	t.Helper()
	args := append([]string{"-C", helmModule, "tool", "helm", "template", "coordinator", chartFromGo,
		"--namespace", "coordinator", "--kube-version", "1.30.0"}, flags...)
	var stderr bytes.Buffer
	cmd := exec.CommandContext(t.Context(), "go", args...)
	cmd.Stderr = &stderr
	require.Error(t, cmd.Run(), "helm template %v rendered", flags)
	return stderr.String()
}

// secretVolume returns the Secret volume mounted at dir in c.
func secretVolume(t *testing.T, d *appsv1.Deployment, c corev1.Container, dir string) *corev1.SecretVolumeSource {
	t.Helper()
	i := slices.IndexFunc(c.VolumeMounts, func(vm corev1.VolumeMount) bool { return vm.MountPath == dir })
	require.GreaterOrEqual(t, i, 0, "nothing mounted at %s", dir)
	assert.True(t, c.VolumeMounts[i].ReadOnly, "%s is mounted read-only", dir)
	j := slices.IndexFunc(d.Spec.Template.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == c.VolumeMounts[i].Name })
	require.GreaterOrEqual(t, j, 0)
	require.NotNil(t, d.Spec.Template.Spec.Volumes[j].Secret, "%s is a Secret", dir)
	return d.Spec.Template.Spec.Volumes[j].Secret
}

// With control on, the rendered config loads with the control listener on
// the container's control port, the token and TLS files where their
// Secrets are mounted, and the settings passed through.
func TestHelmControlConfig(t *testing.T) {
	t.Parallel()
	m := helmTemplate(t, helmControlOn...)
	cfg, d := effectiveConfig(t, m)
	c := container(t, d, coordinatorName)
	ctl := cfg.Control

	require.True(t, ctl.Enabled())
	assert.Equal(t, ":9191", ctl.ListenAddr, "the listener is on every address of the pod")
	assert.Equal(t, int32(9191), containerPort(t, c, "control"))
	assert.Equal(t, 256, ctl.Concurrency, "control.settings")
	assert.Equal(t, "30s", ctl.Membership.RefreshInterval.String())

	token := secretVolume(t, d, c, path.Dir(ctl.TokenFile))
	assert.Equal(t, "rl-token", token.SecretName)
	assert.Equal(t, []corev1.KeyToPath{{Key: "bearer", Path: path.Base(ctl.TokenFile)}}, token.Items)

	tls := secretVolume(t, d, c, path.Dir(ctl.TLS.CertFile))
	assert.Equal(t, "rl-tls", tls.SecretName)
	assert.Equal(t, path.Dir(ctl.TLS.CertFile), path.Dir(ctl.TLS.KeyFile))
	assert.Equal(t, path.Dir(ctl.TLS.CertFile), path.Dir(ctl.TLS.ClientCAFile))
	assert.Equal(t, []string{"tls.crt", "tls.key", "ca.crt"},
		[]string{path.Base(ctl.TLS.CertFile), path.Base(ctl.TLS.KeyFile), path.Base(ctl.TLS.ClientCAFile)},
		"the kubernetes.io/tls Secret's keys")
	assert.Equal(t, "require", ctl.TLS.ClientAuth)
	assert.False(t, cfg.Server.TLS.Enabled(), "control.tls leaves the public listeners alone")
}

// The control port is served by a ClusterIP Service of its own that
// selects the coordinator pods, never by the public Service; without
// control nothing of it renders.
func TestHelmControlService(t *testing.T) {
	t.Parallel()
	m := helmTemplate(t, helmControlOn...)
	d := one[appsv1.Deployment](t, m, coordinatorName)

	s := one[corev1.Service](t, m, "coordinator-control")
	assert.Equal(t, corev1.ServiceTypeClusterIP, s.Spec.Type)
	assert.Empty(t, s.Spec.ClusterIP, "a cluster IP of its own")
	assert.True(t, labels.SelectorFromSet(s.Spec.Selector).Matches(labels.Set(d.Spec.Template.Labels)), "it selects the coordinator pods")
	require.Len(t, s.Spec.Ports, 1)
	assert.Equal(t, int32(9191), s.Spec.Ports[0].Port)
	assert.Equal(t, intstr.FromString("control"), s.Spec.Ports[0].TargetPort)

	for _, p := range one[corev1.Service](t, m, coordinatorName).Spec.Ports {
		assert.NotEqual(t, int32(9191), p.Port, "the public Service carries no control port")
		assert.NotEqual(t, intstr.FromString("control"), p.TargetPort, "the public Service carries no control port")
	}

	off := helmDefaults(t)
	for _, o := range off.objs {
		assert.NotContains(t, o.Name, "control", "control off: %s renders", o)
		assert.NotContains(t, o.Name, "headless", "control off: %s renders", o)
	}
	for _, p := range container(t, one[appsv1.Deployment](t, off, coordinatorName), coordinatorName).Ports {
		assert.NotEqual(t, "control", p.Name)
	}
}

// The default headless Services select exactly the production overlay's
// worker pods of their role on their HTTP port, publish ready pods only,
// and the config's DNS membership resolves each of them (and the extra
// entry of the values) by role and port.
func TestHelmControlHeadlessServices(t *testing.T) {
	t.Parallel()
	m := helmTemplate(t, helmControlOn...)
	cfg, _ := effectiveConfig(t, m)
	pool := workers(t, rendered(t, dirProduction))
	require.Len(t, pool, 3)

	type entry struct {
		role, name string
		port       int
	}
	want := []entry{{"decode", "extra-decode.other.svc", 8001}}
	for role, w := range pool {
		name := "vllm-" + role + "-headless"
		s := one[corev1.Service](t, m, name)
		assert.Equal(t, corev1.ClusterIPNone, s.Spec.ClusterIP, name)
		assert.False(t, s.Spec.PublishNotReadyAddresses, "%s: ready pods only", name)
		sel := labels.SelectorFromSet(s.Spec.Selector)
		for other, ow := range pool {
			assert.Equal(t, other == role, sel.Matches(labels.Set(ow.Spec.Template.Labels)), "%s selects the %s workers", name, other)
		}
		require.Len(t, s.Spec.Ports, 1)
		port := containerPort(t, container(t, w, "vllm"), "http")
		assert.Equal(t, port, s.Spec.Ports[0].Port, name)
		assert.Equal(t, intstr.FromInt32(port), s.Spec.Ports[0].TargetPort, name)
		want = append(want, entry{role, name + ".coordinator.svc", int(port)})
	}
	var got []entry
	for _, e := range cfg.Control.Membership.DNS {
		got = append(got, entry{e.Role, e.Name, e.Port})
	}
	assert.ElementsMatch(t, want, got)

	// control.headlessServices=[] renders none, and the DNS entry of the
	// values is then the whole membership.
	m = helmTemplate(t, append(slices.Clone(helmControlOn), "--set", "control.headlessServices=null")...)
	for _, s := range all[corev1.Service](m) {
		assert.NotEqual(t, corev1.ClusterIPNone, s.Spec.ClusterIP, "no headless Service: %s", s.Name)
	}
	cfg, _ = effectiveConfig(t, m)
	require.Len(t, cfg.Control.Membership.DNS, 1)
	assert.Equal(t, "extra-decode.other.svc", cfg.Control.Membership.DNS[0].Name)
}

// A static membership and a plaintext, tokenless listener render too.
func TestHelmControlStaticPlaintext(t *testing.T) {
	t.Parallel()
	m := helmTemplate(t, "--set", "control.enabled=true,control.headlessServices=null,"+
		"control.membership.static[0].role=prefill,control.membership.static[0].address=10.0.0.5:8000")
	cfg, d := effectiveConfig(t, m)
	c := container(t, d, coordinatorName)
	assert.Equal(t, ":9091", cfg.Control.ListenAddr, "the default port")
	assert.Equal(t, int32(9091), containerPort(t, c, "control"))
	assert.Empty(t, cfg.Control.TokenFile)
	assert.False(t, cfg.Control.TLS.Enabled())
	require.Len(t, cfg.Control.Membership.Static, 1)
	assert.Equal(t, "10.0.0.5:8000", cfg.Control.Membership.Static[0].Address)
	for _, vm := range c.VolumeMounts {
		assert.NotContains(t, vm.MountPath, "control", "no token, no TLS: nothing mounted")
	}
}

// Values the chart cannot honour fail the render with the key at fault.
func TestHelmControlRejects(t *testing.T) {
	t.Parallel()
	withControl := filepath.Join(t.TempDir(), "coordinator.yaml")
	require.NoError(t, os.WriteFile(withControl, []byte("control:\n  listen_addr: 127.0.0.1:9091\n"), 0o600))
	for name, tc := range map[string]struct {
		flags []string
		want  string
	}{
		"no engines": {[]string{"--set", "control.enabled=true,control.headlessServices=null"}, "control.enabled: no engines"},
		"config has control": {
			[]string{"--set", "control.enabled=true", "--set-file", "config=" + withControl},
			"values.config has a control section already",
		},
		"setting the chart owns": {[]string{"--set", "control.enabled=true,control.settings.listen_addr=0.0.0.0:1"}, "control.settings.listen_addr"},
		"selectorless headless Service": {
			[]string{"--set", "control.enabled=true,control.headlessServices[0].name=x,control.headlessServices[0].role=decode,control.headlessServices[0].port=8000"},
			"control.headlessServices x: selector",
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			assert.Contains(t, helmTemplateFails(t, tc.flags...), tc.want)
		})
	}
}
