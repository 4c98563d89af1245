package builtin

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/coordinator-project/coordinator/internal/gateway"
	"github.com/coordinator-project/coordinator/internal/params"
	"github.com/coordinator-project/coordinator/internal/wire/legs"
	"github.com/coordinator-project/coordinator/internal/wire/pd"
	"github.com/coordinator-project/coordinator/steps"
)

// ConditionalDecodeType is the conditional-decode step's config name.
const ConditionalDecodeType = "conditional-decode"

// preferIfAvailable makes the EPP answer 412 instead of scheduling when no
// decode worker holds the prompt's prefix in its cache.
const preferIfAvailable = "if-available"

// ConditionalDecode tries to answer from a decode worker that already caches
// the prompt's prefix, skipping the remaining phases. It posts the request
// like decode does, without kv_transfer_params, to the client's original
// path through the gateway (EPP-Profile: decode, Prefer: if-available).
//
// A 412 is a cache miss: nothing reaches the client and the pipeline goes
// on (typically to encode, prefill and decode). A 2xx answer is relayed to
// the client, event by event when it streams, and ends the pipeline. Any
// other status reaches the client with the worker's status and body, like
// decode's (*gateway.StatusError with Relay set).
type ConditionalDecode struct {
	gateway *gateway.Client
}

// conditionalDecodeParams are the conditional-decode step's params.
type conditionalDecodeParams struct {
	// UseOpenAIFormat is accepted for compatibility and ignored: the step
	// always shapes for the client's own API (decision D1).
	UseOpenAIFormat bool `param:"use_openai_format"`
}

// NewConditionalDecodePlugin registers the conditional-decode step type.
func NewConditionalDecodePlugin(gateway *gateway.Client) steps.Plugin {
	return steps.Plugin{Type: ConditionalDecodeType, New: func(raw map[string]any) (steps.Step, error) {
		var p conditionalDecodeParams
		if err := params.Decode(raw, &p); err != nil {
			return nil, err
		}
		if gateway == nil {
			return nil, errors.New("gateway client is required")
		}
		return &ConditionalDecode{gateway: gateway}, nil
	}}
}

// Execute implements Step.
func (c *ConditionalDecode) Execute(ctx context.Context, rc *steps.RequestContext) error {
	body, err := decodeBody(rc, nil, false)
	if err != nil {
		return err
	}
	resp, err := c.gateway.Post(ctx, gateway.Request{
		Leg:       ConditionalDecodeType,
		Path:      rc.Format.Path(),
		Profile:   gateway.ProfileDecode,
		RequestID: rc.LegID(),
		Header:    rc.PDHeader(gateway.ProfileDecode),
		Prefer:    preferIfAvailable,
		Parts:     body,
	})
	if err != nil {
		var se *gateway.StatusError
		if errors.As(err, &se) {
			if se.StatusCode == http.StatusPreconditionFailed {
				return nil // cache miss: the next steps answer
			}
			se.Relay = true
		}
		return err
	}
	// No KV came with this answer: its usage goes to the client untouched.
	if err := pd.Relay(ctx, resp, answerSink(rc, false), c.answerCap()); err != nil {
		return fmt.Errorf("%s: %w", ConditionalDecodeType, err)
	}
	return steps.ErrDone
}

func (c *ConditionalDecode) answerCap() legs.Cap { return answerCap(c.gateway, ConditionalDecodeType) }

var _ steps.Step = (*ConditionalDecode)(nil)
