package deploy

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"

	"github.com/coordinator-project/coordinator/internal/gateway"
)

// eppConfig mirrors the llm-d router's EndpointPickerConfig, API version
// llm-d.ai/v1 (llm-d.ai API reference, "EndpointPickerConfig (EPP
// Configuration)"): decoding into it strictly catches a misspelt or
// misplaced key before the EPP refuses to start.
type eppConfig struct {
	APIVersion         string          `json:"apiVersion"`
	Kind               string          `json:"kind"`
	FeatureGates       []string        `json:"featureGates,omitempty"`
	Plugins            []eppPlugin     `json:"plugins"`
	SchedulingProfiles []eppProfile    `json:"schedulingProfiles"`
	DataLayer          json.RawMessage `json:"dataLayer,omitempty"`
	FlowControl        json.RawMessage `json:"flowControl,omitempty"`
	RequestHandler     *struct {
		Parsers []struct {
			PluginRef string `json:"pluginRef"`
		} `json:"parsers"`
		PropagatePriority *bool `json:"propagatePriority,omitempty"`
	} `json:"requestHandler,omitempty"`
}

type eppPlugin struct {
	Name       string          `json:"name,omitempty"`
	Type       string          `json:"type"`
	Parameters json.RawMessage `json:"parameters,omitempty"`
}

// name is the instance name: the type when no name is given.
func (p eppPlugin) name() string {
	if p.Name != "" {
		return p.Name
	}
	return p.Type
}

type eppProfile struct {
	Name    string `json:"name"`
	Plugins []struct {
		PluginRef string   `json:"pluginRef"`
		Weight    *float64 `json:"weight,omitempty"`
	} `json:"plugins"`
}

// The plugin types this config may use, as the llm-d router registers them
// (cmd/epp runner, registerInTreePlugins): role and stability. Alpha
// plugins load only with --allow-experimental-plugins.
type pluginInfo struct {
	role  string
	alpha bool
}

var eppPlugins = map[string]pluginInfo{
	"openai-parser":                {role: "parser"},
	"vllmhttp-parser":              {role: "parser"},
	"header-profile-handler":       {role: "profile-handler", alpha: true},
	"single-profile-handler":       {role: "profile-handler"},
	"label-selector-filter":        {role: "filter"},
	"encode-filter":                {role: "filter"},
	"prefill-filter":               {role: "filter"},
	"decode-filter":                {role: "filter"},
	"prefix-cache-affinity-filter": {role: "filter"},
	"approx-prefix-cache-producer": {role: "producer"},
	"inflight-load-producer":       {role: "producer"},
	"token-load-scorer":            {role: "scorer"},
	"active-request-scorer":        {role: "scorer"},
	"queue-scorer":                 {role: "scorer"},
	"prefix-cache-scorer":          {role: "scorer"},
	"max-score-picker":             {role: "picker"},
	"random-picker":                {role: "picker"},
}

const (
	eppConfigFile = "epp-config.yaml"
	roleLabel     = "llm-d.ai/role"
)

func loadEPPConfig(t *testing.T, data []byte) eppConfig {
	t.Helper()
	j, err := yaml.YAMLToJSONStrict(data)
	require.NoError(t, err)
	var cfg eppConfig
	require.NoError(t, decodeStrict(j, &cfg), "EndpointPickerConfig")
	return cfg
}

// The config's shape: known plugins, resolvable references, one profile per
// phase the coordinator sends, chosen by the EPP-Profile header.
func TestEPPConfigShape(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join(dirBase, "epp", eppConfigFile))
	require.NoError(t, err)
	cfg := loadEPPConfig(t, data)
	assert.Equal(t, "llm-d.ai/v1", cfg.APIVersion)
	assert.Equal(t, "EndpointPickerConfig", cfg.Kind)

	plugins := map[string]eppPlugin{}
	for _, p := range cfg.Plugins {
		_, known := eppPlugins[p.Type]
		assert.True(t, known, "unknown plugin type %q", p.Type)
		assert.NotContains(t, plugins, p.name(), "plugin name %q twice", p.name())
		plugins[p.name()] = p
	}
	role := func(ref string) string {
		p, ok := plugins[ref]
		require.True(t, ok, "pluginRef %q names no plugin", ref)
		return eppPlugins[p.Type].role
	}

	require.NotNil(t, cfg.RequestHandler)
	var parsers []string
	for _, p := range cfg.RequestHandler.Parsers {
		assert.Equal(t, "parser", role(p.PluginRef), "requestHandler.parsers: %s", p.PluginRef)
		parsers = append(parsers, plugins[p.PluginRef].Type)
	}
	// The coordinator posts OpenAI bodies, and tokens-in bodies on
	// /inference/v1/generate when use_openai_format is false.
	assert.Subset(t, parsers, []string{"openai-parser", "vllmhttp-parser"})

	// One profile handler: header-profile-handler on EPP-Profile.
	var handlers []eppPlugin
	for _, p := range cfg.Plugins {
		if eppPlugins[p.Type].role == "profile-handler" {
			handlers = append(handlers, p)
		}
	}
	require.Len(t, handlers, 1)
	require.Equal(t, "header-profile-handler", handlers[0].Type)
	var params struct {
		HeaderName     string `json:"headerName"`
		DefaultProfile string `json:"defaultProfile"`
	}
	require.NoError(t, decodeStrict(handlers[0].Parameters, &params))
	assert.True(t, strings.EqualFold(profileHeader, params.HeaderName), "headerName %q", params.HeaderName)

	// The profiles are exactly the values the coordinator sends.
	var names []string
	for _, prof := range cfg.SchedulingProfiles {
		names = append(names, prof.Name)
		var filters, pickers int
		for _, ref := range prof.Plugins {
			switch r := role(ref.PluginRef); r {
			case "filter":
				filters++
				assert.Nil(t, ref.Weight, "profile %s: weight on filter %s", prof.Name, ref.PluginRef)
			case "picker":
				pickers++
			case "scorer":
				assert.NotNil(t, ref.Weight, "profile %s: scorer %s without a weight", prof.Name, ref.PluginRef)
			default:
				assert.Failf(t, "plugin in a profile", "profile %s: %s is a %s", prof.Name, ref.PluginRef, r)
			}
		}
		assert.Positive(t, filters, "profile %s keeps every pod", prof.Name)
		assert.Equal(t, 1, pickers, "profile %s pickers", prof.Name)
	}
	want := []string{gateway.ProfileEncode, gateway.ProfilePrefill, gateway.ProfileDecode}
	assert.ElementsMatch(t, want, names)

	// Every filter, scorer and picker declared is used by a profile.
	used := map[string]bool{}
	for _, prof := range cfg.SchedulingProfiles {
		for _, ref := range prof.Plugins {
			used[ref.PluginRef] = true
		}
	}
	for name, p := range plugins {
		if r := eppPlugins[p.Type].role; r != "parser" && r != "profile-handler" {
			assert.True(t, used[name], "plugin %s (%s) is declared and no profile uses it", name, r)
		}
	}
	assert.Contains(t, names, params.DefaultProfile, "defaultProfile")
}

// roleFilter returns the label selector of the profile's
// label-selector-filter.
func roleFilter(t *testing.T, cfg eppConfig, profile string) labels.Selector {
	t.Helper()
	plugins := map[string]eppPlugin{}
	for _, p := range cfg.Plugins {
		plugins[p.name()] = p
	}
	i := slices.IndexFunc(cfg.SchedulingProfiles, func(p eppProfile) bool { return p.Name == profile })
	require.GreaterOrEqual(t, i, 0, "no profile %s", profile)
	for _, ref := range cfg.SchedulingProfiles[i].Plugins {
		p := plugins[ref.PluginRef]
		if p.Type != "label-selector-filter" {
			continue
		}
		var ls metav1.LabelSelector
		require.NoError(t, decodeStrict(p.Parameters, &ls), "%s parameters", p.name())
		sel, err := metav1.LabelSelectorAsSelector(&ls)
		require.NoError(t, err)
		return sel
	}
	require.Failf(t, "no role filter", "profile %s has no label-selector-filter", profile)
	return nil
}

// Each profile's filter keeps exactly the workers of its role, in the pods
// each overlay deploys; combined roles count for each phase they name.
func TestEPPProfilesSelectWorkersByRole(t *testing.T) {
	t.Parallel()
	for _, dir := range overlays {
		t.Run(dir, func(t *testing.T) {
			t.Parallel()
			m := rendered(t, dir)
			cfg := loadEPPConfig(t, []byte(configMap(t, m, "epp-config").Data[eppConfigFile]))
			ws := workers(t, m)
			require.Len(t, ws, 3)
			for _, profile := range []string{gateway.ProfileEncode, gateway.ProfilePrefill, gateway.ProfileDecode} {
				sel := roleFilter(t, cfg, profile)
				for role, d := range ws {
					assert.Equal(t, role == profile, sel.Matches(labels.Set(d.Spec.Template.Labels)),
						"profile %s, %s pods", profile, role)
				}
				// Combined roles and unlabelled pods.
				assert.True(t, sel.Matches(labels.Set{roleLabel: "encode-prefill-decode"}), "%s: monolithic pod", profile)
				assert.False(t, sel.Matches(labels.Set{}), "%s: unlabelled pod", profile)
			}
			assert.True(t, roleFilter(t, cfg, "prefill").Matches(labels.Set{roleLabel: "prefill-decode"}))
			assert.True(t, roleFilter(t, cfg, "decode").Matches(labels.Set{roleLabel: "prefill-decode"}))
			assert.False(t, roleFilter(t, cfg, "encode").Matches(labels.Set{roleLabel: "prefill-decode"}))
		})
	}
}

// The internal route sends exactly the EPP's profiles to the pool.
func TestRouteProfilesAreEPPProfiles(t *testing.T) {
	t.Parallel()
	for _, dir := range overlays {
		t.Run(dir, func(t *testing.T) {
			t.Parallel()
			m := rendered(t, dir)
			cfg := loadEPPConfig(t, []byte(configMap(t, m, "epp-config").Data[eppConfigFile]))
			var profiles, routed []string
			for _, p := range cfg.SchedulingProfiles {
				profiles = append(profiles, p.Name)
			}
			for _, r := range attached(m, internalGateway, "http") {
				for _, rule := range r.Spec.Rules {
					if len(rule.BackendRefs) == 0 || !isPool(rule.BackendRefs[0]) {
						continue
					}
					for _, match := range rule.Matches {
						for _, h := range match.Headers {
							require.True(t, strings.EqualFold(profileHeader, string(h.Name)))
							require.True(t, h.Type == nil || *h.Type == gatewayv1.HeaderMatchExact)
							routed = append(routed, h.Value)
						}
					}
				}
			}
			sort.Strings(profiles)
			sort.Strings(routed)
			assert.Equal(t, profiles, routed)
		})
	}
}

// argValue returns the value after flag in args.
func argValue(args []string, flag string) (string, bool) {
	for i, a := range args {
		if a == flag && i+1 < len(args) {
			return args[i+1], true
		}
		if v, ok := strings.CutPrefix(a, flag+"="); ok {
			return v, true
		}
	}
	return "", false
}

// The EPP Deployment runs the shipped config for the shipped pool, and the
// pool's endpointPickerRef reaches its ext_proc port.
func TestEPPWiring(t *testing.T) {
	t.Parallel()
	source, err := os.ReadFile(filepath.Join(dirBase, "epp", eppConfigFile))
	require.NoError(t, err)
	for _, dir := range overlays {
		t.Run(dir, func(t *testing.T) {
			t.Parallel()
			m := rendered(t, dir)
			d := one[appsv1.Deployment](t, m, "epp")
			c := container(t, d, "epp")
			cm := configMap(t, m, "epp-config")
			assert.Equal(t, string(source), cm.Data[eppConfigFile])

			// --config-file is the mounted key.
			file, ok := argValue(c.Args, "--config-file")
			require.True(t, ok)
			var mounted bool
			for _, vm := range c.VolumeMounts {
				for _, v := range d.Spec.Template.Spec.Volumes {
					if v.Name == vm.Name && v.ConfigMap != nil && v.ConfigMap.Name == cm.Name &&
						file == vm.MountPath+"/"+eppConfigFile {
						mounted = true
					}
				}
			}
			assert.True(t, mounted, "--config-file %s is not the mounted %s", file, cm.Name)

			// Alpha plugins need the flag.
			cfg := loadEPPConfig(t, []byte(cm.Data[eppConfigFile]))
			if slices.ContainsFunc(cfg.Plugins, func(p eppPlugin) bool { return eppPlugins[p.Type].alpha }) {
				assert.Contains(t, c.Args, "--allow-experimental-plugins")
			}

			// The pool it serves, and the pool's way back to it.
			pools := unstructured(m, kindInferencePool)
			require.Len(t, pools, 1)
			pool, ok := argValue(c.Args, "--pool-name")
			require.True(t, ok)
			assert.Equal(t, pools[0].Name, pool)
			group, _ := argValue(c.Args, "--pool-group")
			assert.Equal(t, "inference.networking.k8s.io", group)
			var spec struct {
				Spec struct {
					EndpointPickerRef struct {
						Name string `json:"name"`
						Port struct {
							Number int32 `json:"number"`
						} `json:"port"`
					} `json:"endpointPickerRef"`
				} `json:"spec"`
			}
			require.NoError(t, json.Unmarshal(pools[0].JSON, &spec))
			ref := spec.Spec.EndpointPickerRef
			svc := servicePort(m, ref.Name, ref.Port.Number)
			require.NotNil(t, svc, "endpointPickerRef %s:%d", ref.Name, ref.Port.Number)
			assert.True(t, labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(d.Spec.Template.Labels)))
			grpcPort, _ := argValue(c.Args, "--grpc-port")
			for _, p := range svc.Spec.Ports {
				if p.Port == ref.Port.Number {
					assert.Equal(t, grpcPort, itoa(containerPort(t, c, p.TargetPort.String())), "ext_proc port")
				}
			}
			healthPort, _ := argValue(c.Args, "--grpc-health-port")
			require.NotNil(t, c.ReadinessProbe)
			require.NotNil(t, c.ReadinessProbe.GRPC)
			assert.Equal(t, healthPort, itoa(c.ReadinessProbe.GRPC.Port))

			// The EPP needs the pool's namespace and an API token.
			assert.True(t, slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool {
				return e.Name == "NAMESPACE" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace"
			}))
			automount := d.Spec.Template.Spec.AutomountServiceAccountToken
			assert.True(t, automount == nil || *automount, "the EPP watches the API")
		})
	}
}

func itoa(n int32) string { return strconv.Itoa(int(n)) }
