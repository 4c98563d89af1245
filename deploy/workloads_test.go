package deploy

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The label in-cluster Gateway implementations put on their data plane pods
// (GEP-1762).
const gatewayNameLabel = "gateway.networking.k8s.io/gateway-name"

// The coordinator Deployment: ports, probes, drain, hardening, spread.
func TestCoordinatorDeployment(t *testing.T) {
	t.Parallel()
	for _, dir := range overlays {
		t.Run(dir, func(t *testing.T) {
			t.Parallel()
			m := rendered(t, dir)
			d := one[appsv1.Deployment](t, m, coordinatorName)
			pod := d.Spec.Template.Spec
			c := container(t, d, coordinatorName)

			assert.Nil(t, d.Spec.Replicas, "the HPA owns the replica count")
			assert.Equal(t, int32(8080), containerPort(t, c, "http"))
			assert.Equal(t, int32(9090), containerPort(t, c, "grpc"))

			probe := func(p *corev1.Probe, path string) {
				require.NotNil(t, p)
				require.NotNil(t, p.HTTPGet)
				assert.Equal(t, path, p.HTTPGet.Path)
				assert.Equal(t, intstr.FromString("http"), p.HTTPGet.Port)
			}
			probe(c.LivenessProbe, "/healthz")
			probe(c.ReadinessProbe, "/readyz")

			require.NotNil(t, pod.AutomountServiceAccountToken)
			assert.False(t, *pod.AutomountServiceAccountToken)
			sa := one[corev1.ServiceAccount](t, m, pod.ServiceAccountName)
			require.NotNil(t, sa.AutomountServiceAccountToken)
			assert.False(t, *sa.AutomountServiceAccountToken)

			require.NotEmpty(t, pod.TopologySpreadConstraints)
			for _, tsc := range pod.TopologySpreadConstraints {
				sel, err := metav1.LabelSelectorAsSelector(tsc.LabelSelector)
				require.NoError(t, err)
				assert.True(t, sel.Matches(labels.Set(d.Spec.Template.Labels)), "spread over %s counts other pods", tsc.TopologyKey)
			}
			keys := []string{}
			for _, tsc := range pod.TopologySpreadConstraints {
				keys = append(keys, tsc.TopologyKey)
			}
			assert.Contains(t, keys, "topology.kubernetes.io/zone")
		})
	}
}

// Every workload we build runs hardened; every container has requests,
// a memory limit and a readiness probe.
func TestWorkloadsAreHardened(t *testing.T) {
	t.Parallel()
	for _, dir := range overlays {
		t.Run(dir, func(t *testing.T) {
			t.Parallel()
			for _, d := range all[appsv1.Deployment](rendered(t, dir)) {
				pod := d.Spec.Template.Spec
				for _, c := range pod.Containers {
					name := d.Name + "/" + c.Name
					assert.False(t, c.Resources.Requests.Cpu().IsZero(), "%s: CPU request", name)
					assert.False(t, c.Resources.Requests.Memory().IsZero(), "%s: memory request", name)
					assert.False(t, c.Resources.Limits.Memory().IsZero(), "%s: memory limit", name)
					assert.NotNil(t, c.ReadinessProbe, "%s: readiness probe", name)
					require.NotNil(t, c.SecurityContext, name)
					require.NotNil(t, c.SecurityContext.AllowPrivilegeEscalation, name)
					assert.False(t, *c.SecurityContext.AllowPrivilegeEscalation, name)

					// Every pod, vLLM's included, has a pod-level securityContext
					// with the runtime's seccomp profile.
					require.NotNil(t, pod.SecurityContext, name)
					require.NotNil(t, pod.SecurityContext.SeccompProfile, name)
					assert.Equal(t, corev1.SeccompProfileTypeRuntimeDefault, pod.SecurityContext.SeccompProfile.Type, name)
					if strings.HasPrefix(c.Image, "vllm/") {
						continue // vLLM images run as root and write their caches
					}
					require.NotNil(t, pod.SecurityContext.RunAsNonRoot, name)
					assert.True(t, *pod.SecurityContext.RunAsNonRoot, name)
					require.NotNil(t, c.SecurityContext.ReadOnlyRootFilesystem, name)
					assert.True(t, *c.SecurityContext.ReadOnlyRootFilesystem, name)
					require.NotNil(t, c.SecurityContext.Capabilities, name)
					assert.Equal(t, []corev1.Capability{"ALL"}, c.SecurityContext.Capabilities.Drop, name)
				}
			}
		})
	}
}

// Every image of the base and the production overlay is pinned to a
// version: no moving tag (:main, :latest) and no tag-less image.
func TestImagesArePinned(t *testing.T) {
	t.Parallel()
	for _, dir := range []string{dirBase, dirProduction} {
		for _, d := range all[appsv1.Deployment](rendered(t, dir)) {
			for _, c := range d.Spec.Template.Spec.Containers {
				if dir == dirBase && c.Image == "coordinator:dev" {
					continue // the image the Dockerfile builds locally; overlays set the release
				}
				ref := c.Image
				if i := strings.LastIndex(ref, "/"); i >= 0 {
					ref = ref[i+1:]
				}
				name, tag, hasTag := strings.Cut(ref, ":")
				assert.True(t, hasTag || strings.Contains(ref, "@sha256:"), "%s %s/%s: %s has no tag", dir, d.Name, c.Name, c.Image)
				assert.NotContains(t, []string{"main", "latest", "master"}, tag, "%s %s/%s: %s is a moving tag", dir, d.Name, c.Name, name)
			}
		}
	}
}

// The HPA scales the coordinator on CPU; the PDB covers its pods.
func TestCoordinatorScaling(t *testing.T) {
	t.Parallel()
	for _, dir := range overlays {
		t.Run(dir, func(t *testing.T) {
			t.Parallel()
			m := rendered(t, dir)
			d := one[appsv1.Deployment](t, m, coordinatorName)
			hpa := one[autoscalingv2.HorizontalPodAutoscaler](t, m, coordinatorName)
			assert.Equal(t, autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: d.Name}, hpa.Spec.ScaleTargetRef)
			require.NotNil(t, hpa.Spec.MinReplicas)
			assert.GreaterOrEqual(t, hpa.Spec.MaxReplicas, *hpa.Spec.MinReplicas)
			require.Len(t, hpa.Spec.Metrics, 1)
			metric := hpa.Spec.Metrics[0]
			require.Equal(t, autoscalingv2.ResourceMetricSourceType, metric.Type)
			assert.Equal(t, corev1.ResourceCPU, metric.Resource.Name)
			assert.Equal(t, autoscalingv2.UtilizationMetricType, metric.Resource.Target.Type)
			requests := container(t, d, coordinatorName).Resources.Requests
			assert.False(t, requests.Cpu().IsZero(), "utilisation needs a CPU request")

			pdb := one[policyv1.PodDisruptionBudget](t, m, coordinatorName)
			sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
			require.NoError(t, err)
			assert.True(t, sel.Matches(labels.Set(d.Spec.Template.Labels)))
			assert.Equal(t, intstr.FromInt32(1), *pdb.Spec.MaxUnavailable)
		})
	}
}

// podTemplates are the pod labels and containers of every Deployment.
func podTemplates(m manifests) map[string]corev1.PodTemplateSpec {
	out := map[string]corev1.PodTemplateSpec{}
	for _, d := range all[appsv1.Deployment](m) {
		out[d.Name] = d.Spec.Template
	}
	return out
}

// Every Service selects pods the overlay deploys, on ports they have; the
// internal Gateway alias selects the Gateway's own pods.
func TestServicesSelectDeployedPods(t *testing.T) {
	t.Parallel()
	for _, dir := range overlays {
		t.Run(dir, func(t *testing.T) {
			t.Parallel()
			m := rendered(t, dir)
			pods := podTemplates(m)
			for _, s := range all[corev1.Service](m) {
				if _, ok := s.Spec.Selector[gatewayNameLabel]; ok {
					assert.Equal(t, map[string]string{gatewayNameLabel: internalGateway}, s.Spec.Selector, s.Name)
					continue
				}
				sel := labels.SelectorFromSet(s.Spec.Selector)
				var matched int
				for name, pod := range pods {
					if !sel.Matches(labels.Set(pod.Labels)) {
						continue
					}
					matched++
					for _, p := range s.Spec.Ports {
						if p.TargetPort.Type != intstr.String {
							continue
						}
						has := slices.ContainsFunc(pod.Spec.Containers, func(c corev1.Container) bool {
							return slices.ContainsFunc(c.Ports, func(cp corev1.ContainerPort) bool { return cp.Name == p.TargetPort.StrVal })
						})
						assert.True(t, has, "Service %s port %s: pod %s has no port %q", s.Name, p.Name, name, p.TargetPort.StrVal)
					}
				}
				assert.Positive(t, matched, "Service %s selects no pod", s.Name)
			}
		})
	}
}

// The InferencePool spans exactly the worker pods, on the port they serve.
func TestPoolSelectsExactlyTheWorkers(t *testing.T) {
	t.Parallel()
	for _, dir := range overlays {
		t.Run(dir, func(t *testing.T) {
			t.Parallel()
			m := rendered(t, dir)
			pools := unstructured(m, kindInferencePool)
			require.Len(t, pools, 1)
			spec := pools[0].Typed.(map[string]any)["spec"].(map[string]any)
			matchLabels := labels.Set{}
			for k, v := range spec["selector"].(map[string]any)["matchLabels"].(map[string]any) {
				matchLabels[k] = v.(string)
			}
			sel := labels.SelectorFromSet(matchLabels)
			ws := workers(t, m)
			for name, pod := range podTemplates(m) {
				_, isWorker := ws[pod.Labels[roleLabel]]
				isWorker = isWorker && ws[pod.Labels[roleLabel]].Name == name
				assert.Equal(t, isWorker, sel.Matches(labels.Set(pod.Labels)), "Deployment %s", name)
				if isWorker {
					for _, tp := range spec["targetPorts"].([]any) {
						n := int32(tp.(map[string]any)["number"].(float64))
						assert.Equal(t, n, containerPort(t, pod.Spec.Containers[0], "http"), "Deployment %s", name)
					}
				}
			}
		})
	}
}

// peer is a pod by its labels, for reachability checks.
type peer struct {
	name   string
	labels labels.Set
}

// allowed reports whether NetworkPolicies admit a TCP connection from src to
// port on dst (same namespace): allowed when no policy selects dst, else
// when one selecting policy has a rule admitting src on port.
func allowed(t *testing.T, policies []*networkingv1.NetworkPolicy, src, dst peer, port int32) bool {
	t.Helper()
	selected := false
	for _, p := range policies {
		sel, err := metav1.LabelSelectorAsSelector(&p.Spec.PodSelector)
		require.NoError(t, err)
		if !sel.Matches(dst.labels) || !slices.Contains(p.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) {
			continue
		}
		selected = true
		for _, rule := range p.Spec.Ingress {
			if portAdmitted(rule.Ports, port) && peerAdmitted(t, rule.From, src) {
				return true
			}
		}
	}
	return !selected
}

func portAdmitted(ports []networkingv1.NetworkPolicyPort, port int32) bool {
	if len(ports) == 0 {
		return true
	}
	for _, p := range ports {
		if p.Port == nil || (p.Port.Type == intstr.Int && p.Port.IntVal == port) {
			return true
		}
	}
	return false
}

func peerAdmitted(t *testing.T, from []networkingv1.NetworkPolicyPeer, src peer) bool {
	t.Helper()
	if len(from) == 0 {
		return true
	}
	for _, f := range from {
		require.Nil(t, f.NamespaceSelector, "cross-namespace peers are not modelled")
		require.Nil(t, f.IPBlock, "IP blocks are not modelled")
		sel, err := metav1.LabelSelectorAsSelector(f.PodSelector)
		require.NoError(t, err)
		if sel.Matches(src.labels) {
			return true
		}
	}
	return false
}

// The network side of the trust gap: only coordinator pods reach the
// internal Gateway; workers and the EPP take traffic only along the
// intended path; KV/EC transfers between workers still flow.
func TestNetworkPoliciesIsolateTheInternalSide(t *testing.T) {
	t.Parallel()
	for _, dir := range overlays {
		t.Run(dir, func(t *testing.T) {
			t.Parallel()
			m := rendered(t, dir)
			policies := all[networkingv1.NetworkPolicy](m)
			pods := podTemplates(m)
			pod := func(name string) peer {
				p, ok := pods[name]
				require.True(t, ok, "no Deployment %s", name)
				return peer{name: name, labels: labels.Set(p.Labels)}
			}
			ws := workers(t, m)
			coordinator := pod(coordinatorName)
			epp := pod("epp")
			render := pod("rendering-service")
			prefill, decode := pod(ws["prefill"].Name), pod(ws["decode"].Name)
			internal := peer{name: "internal gateway", labels: labels.Set{gatewayNameLabel: internalGateway}}
			external := peer{name: "external gateway", labels: labels.Set{gatewayNameLabel: externalGateway}}
			stranger := peer{name: "any other pod", labels: labels.Set{"app": "curl"}}

			tests := []struct {
				src, dst peer
				port     int32
				want     bool
			}{
				{coordinator, internal, 80, true},
				{external, internal, 80, false},
				{stranger, internal, 80, false},
				{render, internal, 80, false},
				{internal, decode, 8000, true},
				{epp, decode, 8000, true},
				{prefill, decode, 5600, true},
				{coordinator, decode, 8000, false},
				{external, prefill, 8000, false},
				{stranger, prefill, 8000, false},
				{internal, epp, 9002, true},
				{stranger, epp, 9002, false},
				{coordinator, render, 8000, true},
				{stranger, render, 8000, false},
				{external, coordinator, 8080, true},
				{stranger, coordinator, 9090, true},
			}
			for _, tt := range tests {
				assert.Equal(t, tt.want, allowed(t, policies, tt.src, tt.dst, tt.port), "%s -> %s:%d", tt.src.name, tt.dst.name, tt.port)
			}

			// Every policy protects pods that exist (or the Gateway's).
			for _, p := range policies {
				sel, err := metav1.LabelSelectorAsSelector(&p.Spec.PodSelector)
				require.NoError(t, err)
				if sel.Matches(internal.labels) {
					continue
				}
				assert.True(t, slices.ContainsFunc(mapsValues(pods), func(tpl corev1.PodTemplateSpec) bool {
					return sel.Matches(labels.Set(tpl.Labels))
				}), "NetworkPolicy %s selects no pod", p.Name)
			}
		})
	}
}

func mapsValues[K comparable, V any](m map[K]V) []V {
	out := make([]V, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}
