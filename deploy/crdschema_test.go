package deploy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/ext"
	"k8s.io/kube-openapi/pkg/validation/spec"
	"k8s.io/kube-openapi/pkg/validation/strfmt"
	"k8s.io/kube-openapi/pkg/validation/validate"
	"sigs.k8s.io/yaml"
)

// crdSchema validates objects of one served CRD version roughly the way the
// API server does on create: structural defaults first, then the OpenAPI v3
// schema (types, enums, patterns, bounds, required), unknown fields
// (rejected, as `kubectl apply --validate=strict` does) and the
// x-kubernetes-validations CEL rules. Not covered: list-type map/set
// uniqueness and rules that need Kubernetes' own CEL libraries (counted in
// skipped) or oldSelf (updates only).
type crdSchema struct {
	apiVersion string
	kind       string
	raw        map[string]any
	openAPI    *validate.SchemaValidator
	env        *cel.Env

	mu       sync.Mutex
	programs map[string]cel.Program
	// skipped holds the rules that do not compile with the standard CEL
	// library and the strings extension.
	skipped map[string]string
}

// loadCRD reads a CustomResourceDefinition file and returns one validator
// per served version.
func loadCRD(path string) ([]*crdSchema, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	j, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var crd struct {
		Spec struct {
			Group string `json:"group"`
			Names struct {
				Kind string `json:"kind"`
			} `json:"names"`
			Versions []struct {
				Name   string `json:"name"`
				Served bool   `json:"served"`
				Schema struct {
					OpenAPIV3Schema json.RawMessage `json:"openAPIV3Schema"`
				} `json:"schema"`
			} `json:"versions"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(j, &crd); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	env, err := cel.NewEnv(cel.Variable("self", cel.DynType), ext.Strings(), cel.OptionalTypes())
	if err != nil {
		return nil, err
	}
	var out []*crdSchema
	for _, v := range crd.Spec.Versions {
		if !v.Served {
			continue
		}
		var s spec.Schema
		if err := json.Unmarshal(v.Schema.OpenAPIV3Schema, &s); err != nil {
			return nil, fmt.Errorf("%s %s: %w", path, v.Name, err)
		}
		raw, err := decodeNumbers(v.Schema.OpenAPIV3Schema)
		if err != nil {
			return nil, err
		}
		out = append(out, &crdSchema{
			apiVersion: crd.Spec.Group + "/" + v.Name,
			kind:       crd.Spec.Names.Kind,
			raw:        raw.(map[string]any),
			openAPI:    validate.NewSchemaValidator(&s, nil, "", strfmt.Default),
			env:        env,
			programs:   map[string]cel.Program{},
			skipped:    map[string]string{},
		})
	}
	return out, nil
}

// decodeNumbers decodes JSON with integral numbers as int64 and the others
// as float64, the types CEL and the schema validator expect.
func decodeNumbers(j []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return normalizeNumbers(v), nil
}

func normalizeNumbers(v any) any {
	switch vv := v.(type) {
	case map[string]any:
		for k, c := range vv {
			vv[k] = normalizeNumbers(c)
		}
	case []any:
		for i, c := range vv {
			vv[i] = normalizeNumbers(c)
		}
	case json.Number:
		if i, err := vv.Int64(); err == nil {
			return i
		}
		f, _ := vv.Float64()
		return f
	}
	return v
}

// validate returns every violation of the schema by the object (JSON), as
// "path: message" strings, sorted.
func (c *crdSchema) validate(objJSON []byte) []string {
	obj, err := decodeNumbers(objJSON)
	if err != nil {
		return []string{err.Error()}
	}
	obj = applyDefaults(c.raw, obj)
	var errs []string
	for _, e := range c.openAPI.Validate(obj).Errors {
		errs = append(errs, e.Error())
	}
	c.walk("", c.raw, obj, &errs)
	sort.Strings(errs)
	return errs
}

// applyDefaults fills absent properties that have a schema default, at any
// depth, like the API server's structural defaulting.
func applyDefaults(s map[string]any, v any) any {
	switch vv := v.(type) {
	case map[string]any:
		props, _ := s["properties"].(map[string]any)
		for name, p := range props {
			ps, _ := p.(map[string]any)
			if _, ok := vv[name]; !ok {
				if d, ok := ps["default"]; ok {
					vv[name] = deepCopy(d)
				}
			}
			if child, ok := vv[name]; ok {
				vv[name] = applyDefaults(ps, child)
			}
		}
		if ap, ok := s["additionalProperties"].(map[string]any); ok {
			for k, child := range vv {
				if _, declared := props[k]; !declared {
					vv[k] = applyDefaults(ap, child)
				}
			}
		}
	case []any:
		if items, ok := s["items"].(map[string]any); ok {
			for i := range vv {
				vv[i] = applyDefaults(items, vv[i])
			}
		}
	}
	return v
}

func deepCopy(v any) any {
	j, _ := json.Marshal(v)
	out, _ := decodeNumbers(j)
	return out
}

// walk checks unknown fields and CEL rules at every node of the object.
func (c *crdSchema) walk(path string, s map[string]any, v any, errs *[]string) {
	if v == nil {
		return
	}
	c.checkRules(path, s, v, errs)
	switch vv := v.(type) {
	case map[string]any:
		props, _ := s["properties"].(map[string]any)
		ap, hasAP := s["additionalProperties"].(map[string]any)
		preserve, _ := s["x-kubernetes-preserve-unknown-fields"].(bool)
		keys := make([]string, 0, len(vv))
		for k := range vv {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			child := vv[k]
			if ps, ok := props[k].(map[string]any); ok {
				c.walk(path+"."+k, ps, child, errs)
				continue
			}
			switch {
			case hasAP:
				c.walk(path+"."+k, ap, child, errs)
			case props != nil && !preserve:
				*errs = append(*errs, fmt.Sprintf("%s.%s: unknown field", path, k))
			}
		}
	case []any:
		if items, ok := s["items"].(map[string]any); ok {
			for i, child := range vv {
				c.walk(fmt.Sprintf("%s[%d]", path, i), items, child, errs)
			}
		}
	}
}

// checkRules evaluates the node's x-kubernetes-validations with self bound
// to the node's value.
func (c *crdSchema) checkRules(path string, s map[string]any, v any, errs *[]string) {
	rules, _ := s["x-kubernetes-validations"].([]any)
	for _, r := range rules {
		rule, _ := r.(map[string]any)
		expr, _ := rule["rule"].(string)
		if expr == "" || strings.Contains(expr, "oldSelf") {
			continue
		}
		prg, ok := c.program(expr)
		if !ok {
			continue
		}
		out, _, err := prg.Eval(map[string]any{"self": v})
		where := path
		if where == "" {
			where = "<root>"
		}
		switch {
		case err != nil:
			*errs = append(*errs, fmt.Sprintf("%s: rule %q: %v", where, expr, err))
		case out != types.True:
			msg, _ := rule["message"].(string)
			*errs = append(*errs, fmt.Sprintf("%s: %s (rule %q)", where, msg, expr))
		}
	}
}

func (c *crdSchema) program(expr string) (cel.Program, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p, ok := c.programs[expr]; ok {
		return p, true
	}
	if _, skipped := c.skipped[expr]; skipped {
		return nil, false
	}
	ast, iss := c.env.Compile(expr)
	if iss.Err() != nil {
		c.skipped[expr] = iss.Err().Error()
		return nil, false
	}
	p, err := c.env.Program(ast)
	if err != nil {
		c.skipped[expr] = err.Error()
		return nil, false
	}
	c.programs[expr] = p
	return p, true
}

// skippedRules lists the rules that could not be compiled so far.
func (c *crdSchema) skippedRules() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, 0, len(c.skipped))
	for r, why := range c.skipped {
		out = append(out, r+": "+why)
	}
	slices.Sort(out)
	return out
}

// crdSet indexes validators by apiVersion/kind.
type crdSet map[string]*crdSchema

func loadCRDs(paths ...string) (crdSet, error) {
	set := crdSet{}
	for _, p := range paths {
		versions, err := loadCRD(p)
		if err != nil {
			return nil, err
		}
		for _, v := range versions {
			set[v.apiVersion+"/"+v.kind] = v
		}
	}
	return set, nil
}

// inferenceCRDs are the repository's copies of the InferencePool and
// InferenceObjective CRDs.
var inferenceCRDs = sync.OnceValues(func() (crdSet, error) {
	return loadCRDs(
		filepath.Join(dirCRDs, "inference.networking.k8s.io_inferencepools.yaml"),
		filepath.Join(dirCRDs, "llm-d.ai_inferenceobjectives.yaml"),
	)
})

// gatewayCRDs are the standard-channel Gateway API CRDs of the
// sigs.k8s.io/gateway-api module go.mod pins (the Go types and the schemas
// come from the same release).
var gatewayCRDs = sync.OnceValues(func() (crdSet, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/gateway-api").Output()
	if err != nil {
		return nil, fmt.Errorf("go list -m sigs.k8s.io/gateway-api: %w", err)
	}
	dir := filepath.Join(strings.TrimSpace(string(out)), "config", "crd", "standard")
	return loadCRDs(
		filepath.Join(dir, "gateway.networking.k8s.io_gateways.yaml"),
		filepath.Join(dir, "gateway.networking.k8s.io_httproutes.yaml"),
		filepath.Join(dir, "gateway.networking.k8s.io_grpcroutes.yaml"),
	)
})
