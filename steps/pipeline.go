package steps

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/coordinator-project/coordinator/internal/spans"
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
	// started counts the steps Start reached (pipeline_lifecycle.go).
	started int
}

// NewPipeline builds the steps listed in configs from the registered
// plugins. An unknown or doubly registered type fails with the sorted list
// of known types; a step whose params are invalid fails naming the step,
// and so does a FirstStep configured anywhere but first. Building starts
// nothing (constructors only decode params): Start does.
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
		if _, first := step.(FirstStep); first && i > 0 {
			return nil, fmt.Errorf("pipeline.steps[%d]: %s must be the first step", i, c.Type)
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

// Outcome is how one step of one request ended.
type Outcome string

// The outcomes.
const (
	OutcomeOK        Outcome = "ok"         // ran; the next step ran, or it was the last
	OutcomeDoneEarly Outcome = "done-early" // answered the client before the last step
	OutcomeError     Outcome = "error"      // failed the request
	OutcomeSkipped   Outcome = "skipped"    // not reached: an earlier step ended the request
)

// Timing is how one step of one request went.
type Timing struct {
	Step     string
	Duration time.Duration
	Outcome  Outcome
}

// Run executes the steps in order until one answers the client (ErrDone),
// refuses the request (a *Refusal), fails, or the list ends. It returns
// nil on success and the step's error (a refusal included), wrapped with
// its name, otherwise. It appends one Timing per configured step to
// rc.Timings as it goes (a refusal counts as an answer; steps not reached:
// OutcomeSkipped, at the end), and, when tracing is on (spans.On), traces
// each step as a span of ctx's.
func (p *Pipeline) Run(ctx context.Context, rc *RequestContext) error {
	// Run keeps its frame small, the rest in the functions it calls: a
	// step's goroutine holds the deepest stack it took for as long as it
	// lives (an open stream's, for its whole answer).
	for i, step := range p.steps {
		if ctx.Err() != nil {
			return p.cancelled(ctx, i, rc)
		}
		stepCtx, span := p.startStep(ctx, i)
		start := time.Now()
		err := step.Execute(stepCtx, rc)
		if done, err := p.endStep(i, rc, start, span, err); done {
			return err
		}
	}
	return nil
}

// cancelled ends a run whose context ended before step i.
func (p *Pipeline) cancelled(ctx context.Context, i int, rc *RequestContext) error {
	p.skipFrom(i, rc)
	return fmt.Errorf("pipeline cancelled: %w", context.Cause(ctx))
}

// startStep starts step i's span when tracing is on (spans.On); nil
// otherwise.
func (p *Pipeline) startStep(ctx context.Context, i int) (context.Context, trace.Span) {
	if !spans.On() {
		return ctx, nil
	}
	return tracer.Start(ctx, p.names[i])
}

// endStep records how step i, started at start, went: its timing and its
// span. done reports that the run ends here, with err: the step failed,
// refused the request or finished it early.
func (p *Pipeline) endStep(i int, rc *RequestContext, start time.Time, span trace.Span, err error) (done bool, _ error) {
	t := Timing{Step: p.names[i], Duration: time.Since(start), Outcome: OutcomeOK}
	refused := errors.As(err, new(*Refusal))
	switch {
	case err == nil:
	case errors.Is(err, ErrDone) || refused:
		if i < len(p.steps)-1 {
			t.Outcome = OutcomeDoneEarly
		}
	default:
		t.Outcome = OutcomeError
	}
	if span != nil {
		endStepSpan(span, t.Outcome, err)
	}
	rc.Timings = append(rc.Timings, t)
	switch {
	case refused:
		p.skipFrom(i+1, rc)
		return true, fmt.Errorf("step %q: %w", p.names[i], err)
	case t.Outcome == OutcomeDoneEarly:
		p.skipFrom(i+1, rc)
		return true, nil
	case t.Outcome == OutcomeError:
		p.skipFrom(i+1, rc)
		return true, fmt.Errorf("step %q: %w", p.names[i], err)
	}
	return false, nil
}

// endStepSpan records a step's outcome (and error) on its span and ends it.
func endStepSpan(span trace.Span, outcome Outcome, err error) {
	if outcome == OutcomeError {
		span.SetStatus(codes.Error, err.Error())
	}
	span.SetAttributes(attribute.String("coordinator.step.outcome", string(outcome)))
	span.End()
}

// skipFrom records the steps from i on as not reached.
func (p *Pipeline) skipFrom(i int, rc *RequestContext) {
	for _, name := range p.names[i:] {
		rc.Timings = append(rc.Timings, Timing{Step: name, Outcome: OutcomeSkipped})
	}
}

// tracer makes the step spans; a no-op until the app installs a tracer
// provider (tracing is off by default).
var tracer = otel.Tracer("github.com/coordinator-project/coordinator/steps")
