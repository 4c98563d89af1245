package steps

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// StepConfig is one entry of the config's pipeline.steps list.
type StepConfig struct {
	Type   string
	Params map[string]any
}

// Defaults are the pipeline-level settings injected into every step's params
// that does not set them itself (as the reference does).
type Defaults struct {
	KVConnector     string
	ECConnector     string
	UseOpenAIFormat bool
}

// Pipeline runs the configured steps of one request in config order.
type Pipeline struct {
	names []string
	steps []Step
}

// NewPipeline builds the steps listed in configs from the registered
// plugins. An unknown or doubly registered type fails with the sorted list
// of known types; a step whose params are invalid fails naming the step.
func NewPipeline(plugins []Plugin, configs []StepConfig, defaults Defaults) (*Pipeline, error) {
	byType := make(map[string]Plugin, len(plugins))
	for _, p := range plugins {
		if _, dup := byType[p.Type]; dup {
			return nil, fmt.Errorf("step type %q registered twice", p.Type)
		}
		byType[p.Type] = p
	}
	known := strings.Join(slices.Sorted(maps.Keys(byType)), ", ")
	if len(configs) == 0 {
		return nil, errors.New("pipeline.steps: at least one step is required")
	}
	p := &Pipeline{}
	for i, c := range configs {
		plugin, ok := byType[c.Type]
		if !ok {
			return nil, fmt.Errorf("pipeline.steps[%d]: unknown step type: %s (known: %s)", i, c.Type, known)
		}
		step, err := plugin.New(withDefaults(c.Params, defaults))
		if err != nil {
			return nil, fmt.Errorf("pipeline.steps[%d] (%s): %w", i, c.Type, err)
		}
		p.names = append(p.names, c.Type)
		p.steps = append(p.steps, step)
	}
	return p, nil
}

// withDefaults copies params and adds the pipeline-level keys it lacks.
func withDefaults(params map[string]any, d Defaults) map[string]any {
	out := make(map[string]any, len(params)+3)
	maps.Copy(out, params)
	if _, ok := out["kv_connector"]; !ok && d.KVConnector != "" {
		out["kv_connector"] = d.KVConnector
	}
	if _, ok := out["ec_connector"]; !ok && d.ECConnector != "" {
		out["ec_connector"] = d.ECConnector
	}
	if _, ok := out["use_openai_format"]; !ok {
		out["use_openai_format"] = d.UseOpenAIFormat
	}
	return out
}

// Names lists the step types in run order.
func (p *Pipeline) Names() []string { return slices.Clone(p.names) }

// Timing is how long one step of one request took.
type Timing struct {
	Step     string
	Duration time.Duration
}

// Run executes the steps in order until one answers the client (ErrDone),
// fails, or the list ends. It returns nil on success and the step's error,
// wrapped with its name, otherwise. timings, if non-nil, receives one entry
// per step started.
func (p *Pipeline) Run(ctx context.Context, rc *RequestContext, timings *[]Timing) error {
	for i, step := range p.steps {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("pipeline cancelled: %w", context.Cause(ctx))
		}
		start := time.Now()
		err := step.Execute(ctx, rc)
		if timings != nil {
			*timings = append(*timings, Timing{Step: p.names[i], Duration: time.Since(start)})
		}
		switch {
		case err == nil:
		case errors.Is(err, ErrDone):
			return nil
		default:
			return fmt.Errorf("step %q: %w", p.names[i], err)
		}
	}
	return nil
}
