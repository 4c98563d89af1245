package steps

import "context"

// TokenCounter is implemented by a step that can count a request's prompt
// tokens without running it: the render step, which asks the render
// service. The service's CountTokens asks the pipeline's first such step
// (Pipeline.TokenCounter); no worker leg is sent.
type TokenCounter interface {
	// CountTokens returns how many prompt token IDs the workers would see
	// for rc's body, a Messages or Responses one. Errors are the step's
	// kinds: legs.ErrInvalidRequest for the client's faults, a
	// *gateway.StatusError or transport error for the service's.
	CountTokens(ctx context.Context, rc *RequestContext) (int, error)
}

// TokenCounter is the first step that counts tokens and its type, nil and
// "" when none is configured.
func (p *Pipeline) TokenCounter() (counter TokenCounter, step string) {
	for i, s := range p.steps {
		if tc, ok := s.(TokenCounter); ok {
			return tc, p.names[i]
		}
	}
	return nil, ""
}
