package deploy

import (
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
	"github.com/coordinator-project/coordinator/internal/gateway"
)

// The header the coordinator puts on every leg and the EPP reads.
const profileHeader = "EPP-Profile"

// Names the manifests give the pieces routing connects.
const (
	externalGateway = "coordinator-gateway"
	internalGateway = "inference-gateway-internal"
	poolName        = "coordinator-pool"
	coordinatorName = "coordinator"
)

// routeRequest is what an HTTPRoute matches on.
type routeRequest struct {
	method string
	path   string
	header http.Header
}

// routed is the outcome of routing one request on one listener.
type routed struct {
	rule    *gatewayv1.HTTPRouteRule
	backend gatewayv1.HTTPBackendRef
	// header is the request's header after the rule's filters.
	header http.Header
}

// candidate is one match of one rule, ranked by Gateway API precedence.
type candidate struct {
	routeIndex, ruleIndex, matchIndex int
	exact                             bool
	prefixLen                         int
	method                            bool
	headers, queries                  int
}

// better reports whether a takes precedence over b (HTTPRoute spec: exact
// path, longest prefix, method, most header matches, most query matches;
// then the first route and the first rule in order).
func (a candidate) better(b candidate) bool {
	switch {
	case a.exact != b.exact:
		return a.exact
	case a.prefixLen != b.prefixLen:
		return a.prefixLen > b.prefixLen
	case a.method != b.method:
		return a.method
	case a.headers != b.headers:
		return a.headers > b.headers
	case a.queries != b.queries:
		return a.queries > b.queries
	case a.routeIndex != b.routeIndex:
		return a.routeIndex < b.routeIndex
	case a.ruleIndex != b.ruleIndex:
		return a.ruleIndex < b.ruleIndex
	}
	return a.matchIndex < b.matchIndex
}

// attached returns the HTTPRoutes bound to a Gateway's listener, sorted by
// name (the precedence tie-break after creation time, which manifests do
// not have).
func attached(m manifests, gateway, section string) []*gatewayv1.HTTPRoute {
	var out []*gatewayv1.HTTPRoute
	for _, r := range all[gatewayv1.HTTPRoute](m) {
		for _, p := range r.Spec.ParentRefs {
			if string(p.Name) == gateway && (p.SectionName == nil || string(*p.SectionName) == section) {
				out = append(out, r)
				break
			}
		}
	}
	slices.SortFunc(out, func(a, b *gatewayv1.HTTPRoute) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// route picks the rule a Gateway API implementation must pick for req among
// routes, applies its request filters, and returns its (single) backend.
func route(t *testing.T, routes []*gatewayv1.HTTPRoute, req routeRequest) (routed, bool) {
	t.Helper()
	var best *candidate
	for ri, r := range routes {
		for ki := range r.Spec.Rules {
			rule := &r.Spec.Rules[ki]
			matches := rule.Matches
			if len(matches) == 0 {
				matches = []gatewayv1.HTTPRouteMatch{{}} // no match: every request
			}
			for mi, m := range matches {
				c, ok := matchRequest(t, m, req)
				if !ok {
					continue
				}
				c.routeIndex, c.ruleIndex, c.matchIndex = ri, ki, mi
				if best == nil || c.better(*best) {
					best = &c
				}
			}
		}
	}
	if best == nil {
		return routed{}, false
	}
	rule := &routes[best.routeIndex].Spec.Rules[best.ruleIndex]
	require.Len(t, rule.BackendRefs, 1, "one backend per rule")
	return routed{rule: rule, backend: rule.BackendRefs[0], header: applyFilters(rule.Filters, req.header)}, true
}

// matchRequest reports whether one HTTPRouteMatch matches req, with its rank.
func matchRequest(t *testing.T, m gatewayv1.HTTPRouteMatch, req routeRequest) (candidate, bool) {
	t.Helper()
	var c candidate
	pathType, pathValue := gatewayv1.PathMatchPathPrefix, "/"
	if m.Path != nil {
		if m.Path.Type != nil {
			pathType = *m.Path.Type
		}
		if m.Path.Value != nil {
			pathValue = *m.Path.Value
		}
	}
	switch pathType {
	case gatewayv1.PathMatchExact:
		if req.path != pathValue {
			return c, false
		}
		c.exact = true
	case gatewayv1.PathMatchPathPrefix:
		if !prefixMatches(pathValue, req.path) {
			return c, false
		}
		c.prefixLen = len(pathValue)
	default:
		require.Failf(t, "unsupported path match", "%s", pathType)
	}
	if m.Method != nil {
		if string(*m.Method) != req.method {
			return c, false
		}
		c.method = true
	}
	for _, h := range m.Headers {
		got := req.header.Values(string(h.Name)) // names match case-insensitively
		if len(got) == 0 {
			return c, false
		}
		typ := gatewayv1.HeaderMatchExact
		if h.Type != nil {
			typ = *h.Type
		}
		switch typ {
		case gatewayv1.HeaderMatchExact:
			if got[0] != h.Value { // values match case-sensitively
				return c, false
			}
		case gatewayv1.HeaderMatchRegularExpression:
			if !regexp.MustCompile("^(?:" + h.Value + ")$").MatchString(got[0]) {
				return c, false
			}
		}
		c.headers++
	}
	require.Empty(t, m.QueryParams, "query matches are not modelled")
	return c, true
}

// prefixMatches is PathPrefix semantics: element-wise, so /v1 matches /v1
// and /v1/x but not /v10.
func prefixMatches(prefix, path string) bool {
	prefix = strings.TrimSuffix(prefix, "/")
	return prefix == "" || path == prefix || strings.HasPrefix(path, prefix+"/")
}

// applyFilters applies the RequestHeaderModifier filters to a copy of h.
func applyFilters(filters []gatewayv1.HTTPRouteFilter, h http.Header) http.Header {
	out := h.Clone()
	if out == nil {
		out = http.Header{}
	}
	for _, f := range filters {
		if f.Type != gatewayv1.HTTPRouteFilterRequestHeaderModifier || f.RequestHeaderModifier == nil {
			continue
		}
		mod := f.RequestHeaderModifier
		for _, name := range mod.Remove {
			out.Del(name)
		}
		for _, s := range mod.Set {
			out.Set(string(s.Name), s.Value)
		}
		for _, a := range mod.Add {
			out.Add(string(a.Name), a.Value)
		}
	}
	return out
}

func isPool(b gatewayv1.HTTPBackendRef) bool {
	return b.Group != nil && string(*b.Group) == "inference.networking.k8s.io" &&
		b.Kind != nil && string(*b.Kind) == kindInferencePool && string(b.Name) == poolName
}

func isCoordinator(b gatewayv1.HTTPBackendRef) bool {
	return (b.Group == nil || *b.Group == "") && (b.Kind == nil || *b.Kind == "Service") &&
		string(b.Name) == coordinatorName && b.Port != nil && *b.Port == 8080
}

func header(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

// The coordinator's paths: what clients post and what every leg reuses.
var inferencePaths = []string{"/v1/chat/completions", "/v1/completions", "/inference/v1/generate"}

// On the internal Gateway, a request with EPP-Profile encode, prefill or
// decode (the values the coordinator sends) goes to the InferencePool; one
// without it, or with another value, goes to the coordinator.
func TestInternalRouteSendsProfilesToThePool(t *testing.T) {
	t.Parallel()
	type tc struct {
		name   string
		req    routeRequest
		toPool bool
	}
	var tests []tc
	for _, path := range inferencePaths {
		for _, profile := range []string{gateway.ProfileEncode, gateway.ProfilePrefill, gateway.ProfileDecode} {
			tests = append(tests, tc{
				name:   profile + " " + path,
				req:    routeRequest{method: http.MethodPost, path: path, header: header(profileHeader, profile)},
				toPool: true,
			})
		}
		tests = append(tests, tc{
			name: "no header " + path,
			req:  routeRequest{method: http.MethodPost, path: path, header: header("Content-Type", "application/json")},
		})
	}
	tests = append(tests,
		tc{name: "header name in any case", req: routeRequest{method: http.MethodPost, path: "/v1/completions", header: header("epp-profile", "prefill")}, toPool: true},
		tc{name: "GET /v1/models with a profile", req: routeRequest{method: http.MethodGet, path: "/v1/models", header: header(profileHeader, "decode")}, toPool: true},
		tc{name: "unknown profile", req: routeRequest{method: http.MethodPost, path: "/v1/completions", header: header(profileHeader, "render")}},
		tc{name: "profile values are case-sensitive", req: routeRequest{method: http.MethodPost, path: "/v1/completions", header: header(profileHeader, "Decode")}},
		tc{name: "no header, other path", req: routeRequest{method: http.MethodGet, path: "/healthz"}},
	)
	for _, dir := range overlays {
		routes := attached(rendered(t, dir), internalGateway, "http")
		require.NotEmpty(t, routes, dir)
		for _, tt := range tests {
			t.Run(dir+"/"+tt.name, func(t *testing.T) {
				t.Parallel()
				got, ok := route(t, routes, tt.req)
				require.True(t, ok, "no rule matches")
				if tt.toPool {
					assert.True(t, isPool(got.backend), "backend %+v", got.backend)
					assert.Equal(t, tt.req.header.Get(profileHeader), got.header.Get(profileHeader), "the EPP needs the header")
				} else {
					assert.True(t, isCoordinator(got.backend), "backend %+v", got.backend)
				}
			})
		}
	}
}

// On the external Gateway every request goes to the coordinator, and a
// forged EPP-Profile is gone before it is forwarded.
func TestExternalRouteIgnoresAndStripsForgedProfiles(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		req  routeRequest
	}{
		{name: "plain chat", req: routeRequest{method: http.MethodPost, path: "/v1/chat/completions", header: header("Content-Type", "application/json")}},
		{name: "forged prefill", req: routeRequest{method: http.MethodPost, path: "/v1/chat/completions", header: header(profileHeader, "prefill")}},
		{name: "forged decode, lower-case name", req: routeRequest{method: http.MethodPost, path: "/v1/completions", header: header("epp-profile", "decode")}},
		{name: "forged encode on generate", req: routeRequest{method: http.MethodPost, path: "/inference/v1/generate", header: header(profileHeader, "encode")}},
		{name: "two forged values", req: routeRequest{method: http.MethodPost, path: "/v1/completions", header: header(profileHeader, "decode", profileHeader, "prefill")}},
		{name: "health", req: routeRequest{method: http.MethodGet, path: "/readyz", header: header(profileHeader, "decode")}},
	}
	for _, dir := range overlays {
		routes := attached(rendered(t, dir), externalGateway, "http")
		require.NotEmpty(t, routes, dir)
		for _, tt := range tests {
			t.Run(dir+"/"+tt.name, func(t *testing.T) {
				t.Parallel()
				got, ok := route(t, routes, tt.req)
				require.True(t, ok, "no rule matches")
				assert.True(t, isCoordinator(got.backend), "backend %+v", got.backend)
				assert.Empty(t, got.header.Values(profileHeader), "EPP-Profile must not reach the coordinator")
			})
		}
	}
}

// The trust gap, structurally: no route on the external Gateway matches on
// EPP-Profile or reaches the pool, and each of its rules strips the header.
func TestExternalGatewayNeverRoutesOnProfile(t *testing.T) {
	t.Parallel()
	for _, dir := range overlays {
		t.Run(dir, func(t *testing.T) {
			t.Parallel()
			m := rendered(t, dir)
			g := one[gatewayv1.Gateway](t, m, externalGateway)
			for _, l := range g.Spec.Listeners {
				for _, r := range attached(m, externalGateway, string(l.Name)) {
					for _, rule := range r.Spec.Rules {
						for _, match := range rule.Matches {
							for _, h := range match.Headers {
								assert.NotEqual(t, strings.ToLower(profileHeader), strings.ToLower(string(h.Name)), "route %s", r.Name)
							}
						}
						for _, b := range rule.BackendRefs {
							assert.False(t, isPool(b), "route %s reaches the pool from outside", r.Name)
						}
						stripped := applyFilters(rule.Filters, header(profileHeader, "prefill"))
						assert.Empty(t, stripped.Values(profileHeader), "route %s keeps EPP-Profile", r.Name)
					}
				}
			}
		})
	}
}

// Every route attaches to a listener that admits its kind, and every backend
// exists with the port the route names.
func TestRouteReferencesResolve(t *testing.T) {
	t.Parallel()
	for _, dir := range overlays {
		t.Run(dir, func(t *testing.T) {
			t.Parallel()
			m := rendered(t, dir)
			services := map[string]*corev1.Service{}
			for _, s := range all[corev1.Service](m) {
				services[s.Name] = s
			}
			listenerAdmits := func(parent gatewayv1.ParentReference, kind string) bool {
				g := one[gatewayv1.Gateway](t, m, string(parent.Name))
				for _, l := range g.Spec.Listeners {
					if parent.SectionName != nil && l.Name != *parent.SectionName {
						continue
					}
					for _, k := range l.AllowedRoutes.Kinds {
						if string(k.Kind) == kind {
							return true
						}
					}
				}
				return false
			}
			checkBackend := func(route string, b gatewayv1.BackendRef) {
				if b.Kind != nil && *b.Kind == kindInferencePool {
					assert.Len(t, unstructuredNamed(m, kindInferencePool, string(b.Name)), 1, "route %s: pool %s", route, b.Name)
					return
				}
				s, ok := services[string(b.Name)]
				require.True(t, ok, "route %s: no Service %s", route, b.Name)
				require.NotNil(t, b.Port, "route %s: Service backend without a port", route)
				assert.True(t, slices.ContainsFunc(s.Spec.Ports, func(p corev1.ServicePort) bool { return p.Port == *b.Port }),
					"route %s: Service %s has no port %d", route, b.Name, *b.Port)
			}
			for _, r := range all[gatewayv1.HTTPRoute](m) {
				for _, p := range r.Spec.ParentRefs {
					assert.True(t, listenerAdmits(p, "HTTPRoute"), "HTTPRoute %s on %s", r.Name, p.Name)
				}
				for _, rule := range r.Spec.Rules {
					for _, b := range rule.BackendRefs {
						checkBackend(r.Name, b.BackendRef)
					}
				}
			}
			for _, r := range all[gatewayv1.GRPCRoute](m) {
				for _, p := range r.Spec.ParentRefs {
					assert.True(t, listenerAdmits(p, "GRPCRoute"), "GRPCRoute %s on %s", r.Name, p.Name)
				}
				for _, rule := range r.Spec.Rules {
					for _, b := range rule.BackendRefs {
						checkBackend(r.Name, b.BackendRef)
					}
				}
			}
		})
	}
}

func unstructuredNamed(m manifests, kind, name string) []object {
	var out []object
	for _, o := range unstructured(m, kind) {
		if o.Name == name {
			out = append(out, o)
		}
	}
	return out
}

// The GRPCRoute serves exactly the coordinator's gRPC service, on the
// coordinator Service's h2c port.
func TestGRPCRouteServesTheCoordinatorService(t *testing.T) {
	t.Parallel()
	for _, dir := range overlays {
		t.Run(dir, func(t *testing.T) {
			t.Parallel()
			m := rendered(t, dir)
			routes := all[gatewayv1.GRPCRoute](m)
			require.Len(t, routes, 1)
			r := routes[0]
			require.Len(t, r.Spec.Rules, 1)
			rule := r.Spec.Rules[0]
			require.Len(t, rule.Matches, 1)
			method := rule.Matches[0].Method
			require.NotNil(t, method)
			require.NotNil(t, method.Service)
			assert.Equal(t, coordinatorv1.CoordinatorService_ServiceDesc.ServiceName, *method.Service)
			assert.Nil(t, method.Method, "every RPC of the service")
			require.Len(t, rule.BackendRefs, 1)
			b := rule.BackendRefs[0]
			assert.Equal(t, coordinatorName, string(b.Name))
			svc := one[corev1.Service](t, m, coordinatorName)
			for _, p := range svc.Spec.Ports {
				if b.Port != nil && p.Port == *b.Port {
					require.NotNil(t, p.AppProtocol)
					assert.Equal(t, "kubernetes.io/h2c", *p.AppProtocol, "gRPC needs HTTP/2 to the backend")
					assert.Equal(t, "grpc", p.TargetPort.String())
				}
			}
		})
	}
}

// The matcher itself follows the precedence rules it is trusted with.
func TestRouteMatcherPrecedence(t *testing.T) {
	t.Parallel()
	exact, prefix := gatewayv1.PathMatchExact, gatewayv1.PathMatchPathPrefix
	path := func(typ gatewayv1.PathMatchType, v string) *gatewayv1.HTTPPathMatch {
		return &gatewayv1.HTTPPathMatch{Type: &typ, Value: &v}
	}
	backend := func(name string) []gatewayv1.HTTPBackendRef {
		return []gatewayv1.HTTPBackendRef{{BackendRef: gatewayv1.BackendRef{BackendObjectReference: gatewayv1.BackendObjectReference{Name: gatewayv1.ObjectName(name)}}}}
	}
	r := &gatewayv1.HTTPRoute{Spec: gatewayv1.HTTPRouteSpec{Rules: []gatewayv1.HTTPRouteRule{
		{Matches: []gatewayv1.HTTPRouteMatch{{Path: path(prefix, "/")}}, BackendRefs: backend("catch-all")},
		{Matches: []gatewayv1.HTTPRouteMatch{{Path: path(prefix, "/v1")}}, BackendRefs: backend("v1")},
		{Matches: []gatewayv1.HTTPRouteMatch{{Path: path(exact, "/v1/completions")}}, BackendRefs: backend("exact")},
		{Matches: []gatewayv1.HTTPRouteMatch{{Path: path(prefix, "/v1"), Headers: []gatewayv1.HTTPHeaderMatch{{Name: "X-A", Value: "1"}}}}, BackendRefs: backend("v1+header")},
	}}}
	tests := []struct {
		name string
		req  routeRequest
		want string
	}{
		{name: "exact beats prefix and headers", req: routeRequest{path: "/v1/completions", header: header("X-A", "1")}, want: "exact"},
		{name: "longer prefix wins", req: routeRequest{path: "/v1/models"}, want: "v1"},
		{name: "more headers win at equal prefix", req: routeRequest{path: "/v1/models", header: header("x-a", "1")}, want: "v1+header"},
		{name: "prefixes are path elements", req: routeRequest{path: "/v10"}, want: "catch-all"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := route(t, []*gatewayv1.HTTPRoute{r}, tt.req)
			require.True(t, ok)
			assert.Equal(t, tt.want, string(got.backend.Name))
		})
	}
}
