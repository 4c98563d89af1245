package steps

import (
	"errors"
	"fmt"
	"io"
)

// RequestStore returns the first configured step that keeps queued
// requests, or nil when the pipeline has none.
func (p *Pipeline) RequestStore() RequestStore {
	for _, s := range p.steps {
		if rs, ok := s.(RequestStore); ok {
			return rs
		}
	}
	return nil
}

// Close releases what the steps hold (connections, background work): it
// closes every step implementing io.Closer, in reverse order, and returns
// their errors joined. Call it once, after the last request ended.
func (p *Pipeline) Close() error {
	var errs []error
	for i := len(p.steps) - 1; i >= 0; i-- {
		if c, ok := p.steps[i].(io.Closer); ok {
			if err := c.Close(); err != nil {
				errs = append(errs, fmt.Errorf("step %q: close: %w", p.names[i], err))
			}
		}
	}
	return errors.Join(errs...)
}
