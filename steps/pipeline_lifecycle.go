package steps

import (
	"context"
	"errors"
	"fmt"

	"github.com/coordinator-project/coordinator/internal/headers"
)

// Start starts the steps implementing Starter, in config order. When one
// fails, the steps started before it are stopped (reverse order) and its
// error is returned naming it: "pipeline.steps[i] (type): ...". Call it
// once, before the first request (the service's fx OnStart hook does).
func (p *Pipeline) Start(ctx context.Context) error {
	for i, s := range p.steps {
		st, ok := s.(Starter)
		if !ok {
			p.started = i + 1
			continue
		}
		if err := st.Start(ctx); err != nil {
			_ = p.Stop(ctx)
			return fmt.Errorf("pipeline.steps[%d] (%s): %w", i, p.names[i], err)
		}
		p.started = i + 1
	}
	return nil
}

// Stop stops the steps implementing Stopper that Start reached, in
// reverse config order, and returns their errors joined, each naming its
// step. Call it once, after the last request ended (the service's fx
// OnStop hook does, after the servers drained); a pipeline that was never
// started has nothing to stop.
func (p *Pipeline) Stop(ctx context.Context) error {
	var errs []error
	for i := p.started - 1; i >= 0; i-- {
		st, ok := p.steps[i].(Stopper)
		if !ok {
			continue
		}
		if err := st.Stop(ctx); err != nil {
			errs = append(errs, fmt.Errorf("step %q: stop: %w", p.names[i], err))
		}
	}
	p.started = 0
	return errors.Join(errs...)
}

// RequestStore returns the first configured step that keeps queued
// requests and its type, or nil and "" when the pipeline has none.
func (p *Pipeline) RequestStore() (store RequestStore, step string) {
	for i, s := range p.steps {
		if rs, ok := s.(RequestStore); ok {
			return rs, p.names[i]
		}
	}
	return nil, ""
}

// Holds implements Holder: whether any step may hold a request with these
// headers open.
func (p *Pipeline) Holds(header headers.Forwarded) bool {
	for _, s := range p.steps {
		if h, ok := s.(Holder); ok && h.Holds(header) {
			return true
		}
	}
	return false
}

var _ Holder = (*Pipeline)(nil)
