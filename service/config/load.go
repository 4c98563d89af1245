package config

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/coordinator-project/coordinator/internal/params"
)

// Load reads the YAML file at path, applies COORDINATOR_* overrides from
// lookupEnv (pass os.LookupEnv in production; nil means none), fills defaults
// and validates. Errors after reading name the file and the key.
func Load(path string, lookupEnv func(string) (string, bool)) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("reading config: %w", err)
	}
	cfg, err := Parse(data, lookupEnv)
	if err != nil {
		return Config{}, fmt.Errorf("config %s: %w", path, err)
	}
	return cfg, nil
}

// Parse is Load for YAML bytes (the embedded dev config, tests). An empty
// document is all defaults.
//
// Keys are decoded strictly with internal/params: unknown keys, wrong types and
// non-integral numbers for integers are errors naming the key path.
func Parse(data []byte, lookupEnv func(string) (string, bool)) (Config, error) {
	var doc any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		var te *yaml.TypeError // several lines: one per error
		if errors.As(err, &te) {
			return Config{}, fmt.Errorf("yaml: %s", strings.Join(te.Errors, "; "))
		}
		return Config{}, err // "yaml: line N: ..."
	}
	raw, ok := normalize(doc).(map[string]any)
	if doc != nil && !ok {
		got := "a scalar"
		if _, list := doc.([]any); list {
			got = "a list"
		}
		return Config{}, fmt.Errorf("expected a map of keys at the top level, got %s", got)
	}
	cfg := Default()
	if err := params.DecodeExact(raw, &cfg); err != nil {
		return Config{}, err
	}
	if lookupEnv != nil {
		if err := applyEnv(&cfg, lookupEnv); err != nil {
			return Config{}, err
		}
	}
	cfg.fill()
	if err := cfg.Validate(); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// fill sets the defaults that depend on the decoded values.
func (c *Config) fill() {
	if c.Server.MaxRequestBodySize == 0 {
		c.Server.MaxRequestBodySize = defaultMaxRequestBodySize
	}
	c.Gateway.Address = strings.TrimSuffix(c.Gateway.Address, "/")
	for i := range c.Pipeline.Steps {
		if c.Pipeline.Steps[i].Params == nil {
			c.Pipeline.Steps[i].Params = map[string]any{}
		}
	}
}

// normalize rewrites, in place where it can, any map[any]any (YAML mappings
// with non-string keys) into a map[string]any, recursively.
func normalize(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = normalize(e)
		}
	case map[any]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[fmt.Sprint(k)] = normalize(e)
		}
		return m
	case []any:
		for i, e := range x {
			x[i] = normalize(e)
		}
	}
	return v
}
