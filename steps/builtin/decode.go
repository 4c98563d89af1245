package builtin

import (
	"context"
	"errors"
	"fmt"

	"github.com/coordinator-project/coordinator/connectors/kv"
	"github.com/coordinator-project/coordinator/internal/gateway"
	"github.com/coordinator-project/coordinator/internal/jsonbody"
	"github.com/coordinator-project/coordinator/internal/params"
	"github.com/coordinator-project/coordinator/internal/requestbody"
	"github.com/coordinator-project/coordinator/internal/wire/bodykeys"
	"github.com/coordinator-project/coordinator/internal/wire/features"
	"github.com/coordinator-project/coordinator/internal/wire/legs"
	"github.com/coordinator-project/coordinator/internal/wire/pd"
	"github.com/coordinator-project/coordinator/steps"
)

// DecodeType is the decode step's config name.
const DecodeType = "decode"

// Decode is the terminal step: it posts the request to a decode worker
// through the gateway (EPP-Profile: decode) on the client's original path
// and relays the answer to the client as it arrives, event by event when
// the worker streams; after a prefill, the answer's usage and prompt
// logprobs come from the prefill worker (D21, D22: package pd). A
// worker's non-2xx answer reaches the client with its status and body
// unchanged.
type Decode struct {
	gateway *gateway.Client
	kv      kv.Connector
}

// decodeParams are the decode step's params.
type decodeParams struct {
	// UseOpenAIFormat is accepted for compatibility and ignored: decode
	// always shapes for the client's own API (decision D1).
	UseOpenAIFormat bool `param:"use_openai_format"`
	// KVConnector names the connector that shapes kv_transfer_params.
	KVConnector string `param:"kv_connector"`
}

// NewDecodePlugin registers the decode step type.
func NewDecodePlugin(gateway *gateway.Client, kvs *kv.Set) steps.Plugin {
	return steps.Plugin{Type: DecodeType, New: func(raw map[string]any) (steps.Step, error) {
		var p decodeParams
		if err := params.Decode(raw, &p); err != nil {
			return nil, err
		}
		connector, err := kvs.Get(p.KVConnector)
		if err != nil {
			return nil, err
		}
		return &Decode{gateway: gateway, kv: connector}, nil
	}}
}

// Execute implements Step.
func (d *Decode) Execute(ctx context.Context, rc *steps.RequestContext) error {
	body, err := d.body(rc)
	if err != nil {
		return err
	}
	rc.PD.DecodeSent = true
	resp, err := d.gateway.Post(ctx, gateway.Request{
		Leg:       DecodeType,
		Path:      rc.Format.Path(),
		Profile:   gateway.ProfileDecode,
		RequestID: rc.LegID(),
		Header:    rc.PDHeader(gateway.ProfileDecode),
		Parts:     body,
	})
	if err != nil {
		var se *gateway.StatusError
		if errors.As(err, &se) {
			se.Relay = true
		}
		return err
	}
	if err := pd.Relay(ctx, resp, answerSink(rc, rc.PD.Done), d.answerCap()); err != nil {
		return fmt.Errorf("decode: %w", err)
	}
	return steps.ErrDone
}

// answerCapKey is the config key of the cap on a buffered decode answer.
const answerCapKey = "gateway.max_answer_size"

// answerCap is the cap on a buffered answer of the decode leg named leg.
func answerCap(gw *gateway.Client, leg string) legs.Cap {
	return legs.Cap{Leg: leg, Max: gw.MaxAnswer(), Key: answerCapKey}
}

func (d *Decode) answerCap() legs.Cap { return answerCap(d.gateway, DecodeType) }

// body shapes the decode leg: the KV connector's decode params only after a
// prefill ran (decision D2), never the coordinator's ec_transfer_params.
func (d *Decode) body(rc *steps.RequestContext) ([][]byte, error) {
	var kvParams []byte
	if rc.PD.Done {
		p, err := d.kv.DecodeParams(rc.PD.KVParams)
		if err != nil {
			return nil, fmt.Errorf("decode: %w", err)
		}
		kvParams = p
	}
	return decodeBody(rc, kvParams, true)
}

// decodeBody shapes a leg to the decode profile (decode, conditional-decode)
// for the client's API (decision D1): kvParams, when non-nil, as
// kv_transfer_params (under sampling_params.extra_args for generate);
// "tokens" (chat) or "prompt" (completions) only when there are token IDs
// (D3); with imageUUIDs, each chat image part's "uuid" from its entry's hash
// when that hash is non-empty (D4); with kvParams, nothing that asks for the
// prompt's logprobs (D22). Client fields are kept as sent; with nothing to
// add the document goes out as it stands (the client's bytes, when no step
// edited it).
func decodeBody(rc *steps.RequestContext, kvParams []byte, imageUUIDs bool) ([][]byte, error) {
	doc, err := rc.Document()
	if err != nil {
		return nil, err
	}
	hasTokens := rc.Tokens.Len() > 0 && rc.Format != legs.FormatGenerate
	hasHashes := imageUUIDs && rc.Format == legs.FormatChat && anyHash(rc.Multimodal)
	if kvParams == nil && !hasTokens && !hasHashes {
		return doc.Write(doc.Root()), nil
	}
	leg := doc.Leg()
	if kvParams != nil { // after a prefill: the prompt's logprobs are its (D22)
		pd.DropPromptLogprobs(leg, rc.Format)
	}
	switch rc.Format {
	case legs.FormatChat:
		if kvParams != nil {
			leg.Set(bodykeys.KVTransferParams, kvParams)
		}
		if hasTokens {
			leg.Set(bodykeys.Tokens, rc.TokensExtension())
		}
		if hasHashes {
			setImageUUIDs(doc, leg, rc.Multimodal)
		}
	case legs.FormatMessages:
		if kvParams != nil {
			leg.Set(bodykeys.KVTransferParams, kvParams)
		}
	case legs.FormatCompletions:
		if kvParams != nil {
			leg.Set(bodykeys.KVTransferParams, kvParams)
		}
		if hasTokens {
			leg.Set(bodykeys.Prompt, rc.Tokens.JSON())
		}
	case legs.FormatGenerate:
		if kvParams != nil {
			if err := legs.SetNested(leg, bodykeys.SamplingParams, bodykeys.ExtraArgs, bodykeys.KVTransferParams, kvParams); err != nil {
				return nil, err
			}
		}
	}
	return doc.Write(leg), nil
}

// answerSink is the sink a decode-profile answer goes through to rc.Sink
// (pd.AnswerSink): when prefillRan (its leg took the KV of the prefill that
// ran) it applies D21 to the usage and merges the prefill's prompt
// logprobs (D22); for every answer it records the usage in rc.PD.Usage.
func answerSink(rc *steps.RequestContext, prefillRan bool) legs.Sink {
	r := pd.Request{Format: rc.Format, Stream: rc.Stream, Usage: &rc.PD.Usage}
	if prefillRan {
		r.Prefill = &rc.PD.Answer
	}
	return pd.AnswerSink(rc.Sink, r)
}

func anyHash(entries []features.MultimodalEntry) bool {
	for _, e := range entries {
		if e.Hash != "" {
			return true
		}
	}
	return false
}

// setImageUUIDs gives the k-th image part of leg "uuid": the k-th entry's
// hash, when that hash is known.
func setImageUUIDs(doc *requestbody.Document, leg *jsonbody.Object, entries []features.MultimodalEntry) {
	for k := range doc.ImageParts() {
		if k >= len(entries) || entries[k].Hash == "" {
			continue
		}
		part, _ := doc.ImageParts().Edit(leg, k)
		part.Set("uuid", jsonbody.AppendString(nil, entries[k].Hash))
	}
}

var _ steps.Step = (*Decode)(nil)
