package builtin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/coordinator-project/coordinator/connectors/ec"
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

// PrefillType is the prefill step's config name.
const PrefillType = "prefill"

// Prefill computes the prompt's KV cache on a prefill worker through the
// gateway (EPP-Profile: prefill): it sends the prompt capped to one output
// token, with the KV connector's prefill kv_transfer_params and the EC
// connector's merge of the encoders' ec_transfer_params, and keeps the
// kv_transfer_params the worker answers with in RequestContext.KVParams for
// the decode leg. It runs for every request, text-only included.
//
// An answer whose kv_transfer_params lack what the KV connector's decode
// worker needs (kv.Connector.MissingParams) has lost the KV: the step
// fails with an *pd.IncompleteKVError (decision D26) rather than let decode
// run with the connector's bare flags.
//
// With fallback_to_decode, a prefill leg that fails upstream (a 5xx
// answer, no answer, a timeout, an answer without the KV params) is
// recorded in RequestContext.PD.Fallback and the step returns nil
// without KV params, so decode serves the request alone (aggregated).
type Prefill struct {
	gateway          *gateway.Client
	kv               kv.Connector
	ec               ec.Connector
	useOpenAIFormat  bool
	fallbackToDecode bool
}

// prefillParams are the prefill step's params.
type prefillParams struct {
	// UseOpenAIFormat sends the leg in the client's API when true and in
	// the tokens-in generate format when false (completions requests stay
	// completions).
	UseOpenAIFormat bool `param:"use_openai_format"`
	// KVConnector names the connector that shapes kv_transfer_params.
	KVConnector string `param:"kv_connector"`
	// ECConnector names the connector that merges the encoders'
	// ec_transfer_params.
	ECConnector string `param:"ec_connector"`
	// FallbackToDecode lets decode serve the request alone when the
	// prefill leg fails upstream (5xx, transport error, timeout, an answer
	// without the kv_transfer_params the connector needs); a 4xx
	// answer and the client's cancellation still fail the request.
	// Default false: the operator decides whether aggregated decode is
	// acceptable.
	FallbackToDecode bool `param:"fallback_to_decode"`
}

// NewPrefillPlugin registers the prefill step type.
func NewPrefillPlugin(gateway *gateway.Client, kvs *kv.Set, ecs *ec.Set) steps.Plugin {
	return steps.Plugin{Type: PrefillType, New: func(raw map[string]any) (steps.Step, error) {
		var p prefillParams
		if err := params.Decode(raw, &p); err != nil {
			return nil, err
		}
		kvConnector, err := kvs.Get(p.KVConnector)
		if err != nil {
			return nil, err
		}
		ecConnector, err := ecs.Get(p.ECConnector)
		if err != nil {
			return nil, err
		}
		return &Prefill{gateway: gateway, kv: kvConnector, ec: ecConnector, useOpenAIFormat: p.UseOpenAIFormat,
			fallbackToDecode: p.FallbackToDecode}, nil
	}}
}

// Execute implements Step. It sets rc.PD.KVParams (nil when the worker sent no
// kv_transfer_params object), rc.PD.Answer and rc.PD.Done, or, when
// it falls back to decode alone, rc.PD.Fallback.
func (p *Prefill) Execute(ctx context.Context, rc *steps.RequestContext) error {
	err := p.execute(ctx, rc)
	if err == nil || !p.fallbackToDecode {
		return err
	}
	reason := fallbackReason(ctx, err)
	if reason == "" {
		return err
	}
	rc.PD.KVParams, rc.PD.Done, rc.PD.Answer = nil, false, pd.PrefillAnswer{}
	rc.PD.Fallback = &pd.Fallback{Reason: reason, Err: err}
	return nil
}

// execute runs the prefill leg; none for an API whose decode leg cannot
// take the KV (Responses: legs.Format.TakesKVParams), which is decoded
// where it is served.
func (p *Prefill) execute(ctx context.Context, rc *steps.RequestContext) error {
	if !rc.Format.TakesKVParams() {
		return nil
	}
	ecParams, err := p.ec.PrefillParams(rc.ECDescriptors)
	if err != nil {
		return fmt.Errorf("prefill: %w", err)
	}
	kvParams, err := p.kv.PrefillParams()
	if err != nil {
		return fmt.Errorf("prefill: %w", err)
	}
	format := legs.ResolveFormat(rc.Format, p.useOpenAIFormat)
	body, err := prefillBody(rc, format, kvParams, ecParams)
	if err != nil {
		return err
	}
	resp, err := p.gateway.Post(ctx, gateway.Request{
		Leg:       PrefillType,
		Path:      format.Path(),
		Profile:   gateway.ProfilePrefill,
		RequestID: rc.LegID(),
		Header:    rc.PDHeader(gateway.ProfilePrefill),
		Parts:     body,
		Retry:     true,
	})
	if err != nil {
		return err
	}
	status := resp.StatusCode
	kvAnswer, answer, err := pd.ReadPrefillAnswer(resp, PrefillType, format)
	if err != nil {
		return err
	}
	if missing := p.kv.MissingParams(kvAnswer); len(missing) > 0 {
		return &pd.IncompleteKVError{Leg: PrefillType, StatusCode: status, Connector: p.kv.Name(), Missing: missing}
	}
	rc.PD.KVParams, rc.PD.Answer = kvAnswer, answer
	rc.PD.Done = true
	return nil
}

// fallbackReason classifies a prefill failure that decode may absorb, or
// returns "" for one that must reach the client: the client's cancellation
// or deadline (ctx ended), a 4xx answer (the request's fault), a malformed
// answer or a request the coordinator could not build. An answer without
// the KV params is absorbed (D26): the worker is at fault, not the request.
func fallbackReason(ctx context.Context, err error) string {
	if ctx.Err() != nil {
		return ""
	}
	var se *gateway.StatusError
	var te *gateway.TransportError
	var ie *pd.IncompleteKVError
	switch {
	case errors.As(err, &ie):
		return pd.FallbackMissingKVParams
	case errors.As(err, &se):
		if se.StatusCode >= 500 {
			return pd.FallbackStatus5xx
		}
	case errors.As(err, &te):
		if te.Timeout() {
			return pd.FallbackTimeout
		}
		return pd.FallbackTransport
	}
	return ""
}

// prefillBody writes the prefill leg in format f. kvParams is always sent;
// ecParams only when non-nil. The prompt's logprobs are asked here, of the
// prefill leg only (D22, package pd).
//
//   - chat: the client's body, capped to one token, with "tokens" (token
//     IDs and features without tensors; only when there are token IDs,
//     decision D3) and top-level kv_transfer_params / ec_transfer_params.
//   - messages: the client's body, capped to one token, with top-level
//     kv_transfer_params (and neither tokens nor ec_transfer_params).
//   - completions: a fresh body with request_id, model, the client's
//     cache_salt if any, prompt (the token
//     IDs, else the client's prompt as sent), the transfer params, one
//     token unstreamed, and features with tensors when there are images.
//   - generate: a fresh body with request_id, model, cache_salt if any,
//     token_ids (see generatePrefillPrompt), features with tensors when
//     there are images, and the transfer params under
//     sampling_params.extra_args (no client sampling params).
func prefillBody(rc *steps.RequestContext, f legs.Format, kvParams, ecParams json.RawMessage) ([][]byte, error) {
	doc, err := rc.Document()
	if err != nil {
		return nil, err
	}
	ask, err := pd.ReadPromptAsk(doc.Root(), rc.Format, rc.Stream)
	if err != nil {
		return nil, err
	}
	switch f {
	case legs.FormatChat:
		leg := doc.Leg()
		if err := legs.CapSingleToken(leg, f); err != nil {
			return nil, err
		}
		if rc.Tokens.Len() > 0 {
			leg.Set(bodykeys.Tokens, rc.TokensExtension())
		}
		leg.Set(bodykeys.KVTransferParams, kvParams)
		if ecParams != nil {
			leg.Set(bodykeys.ECTransferParams, ecParams)
		}
		return doc.Write(leg), nil
	case legs.FormatMessages: // no tokens nor ec_transfer_params: vLLM's /v1/messages reads neither
		leg := doc.Leg()
		if err := legs.CapSingleToken(leg, f); err != nil {
			return nil, err
		}
		leg.Set(bodykeys.KVTransferParams, kvParams)
		return doc.Write(leg), nil
	case legs.FormatCompletions:
		var b jsonbody.Segments
		prefillHead(&b, rc, doc)
		b.WriteString(`,"prompt":`)
		b.Ref(completionsPrompt(rc, doc))
		b.WriteString(`,"kv_transfer_params":`)
		b.Write(kvParams)
		pd.AppendCompletionsCap(&b, ask, rc.Stream)
		appendPrefillFeatures(&b, rc.Multimodal)
		if ecParams != nil {
			b.WriteString(`,"ec_transfer_params":`)
			b.Write(ecParams)
		}
		b.WriteString("}")
		return b.Parts(), nil
	default: // generate
		return generatePrefillBody(rc, doc, ask, kvParams, ecParams)
	}
}

// generatePrefillBody writes a generate-format prefill leg (prefillBody).
func generatePrefillBody(rc *steps.RequestContext, doc *requestbody.Document, ask pd.PromptAsk, kvParams, ecParams json.RawMessage) ([][]byte, error) {
	tokens, images, err := generatePrefillPrompt(rc, doc)
	if err != nil {
		return nil, err
	}
	var b jsonbody.Segments
	prefillHead(&b, rc, doc)
	b.WriteString(`,"token_ids":`)
	b.Ref(tokens)
	appendPrefillFeatures(&b, images)
	b.WriteString(`,"sampling_params":{"max_tokens":1`)
	pd.AppendSamplingAsk(&b, ask, rc.Stream)
	b.WriteString(`,"extra_args":{"kv_transfer_params":`)
	b.Write(kvParams)
	if ecParams != nil {
		b.WriteString(`,"ec_transfer_params":`)
		b.Write(ecParams)
	}
	b.WriteString(`}},"stream":false}`)
	return b.Parts(), nil
}

// generatePrefillPrompt is the token IDs (as JSON) and images of a
// generate-format prefill leg: what render left, else, for a tokens-in
// request that no render step read, the body's own token_ids and features,
// checked as render checks them (so the leg never asks a worker to prefill
// "token_ids": [] while decode gets the prompt). A chat request shaped for
// the generate format without a render step has no token IDs at all: an
// error, rather than a prefill of nothing.
func generatePrefillPrompt(rc *steps.RequestContext, doc *requestbody.Document) ([]byte, []features.MultimodalEntry, error) {
	if rc.Tokens.Len() > 0 {
		return rc.Tokens.JSON(), rc.Multimodal, nil
	}
	if rc.Format != legs.FormatGenerate {
		return nil, nil, errNoPrefillTokens
	}
	tokens, images, err := generatePrompt(doc.Root())
	if err != nil {
		return nil, nil, fmt.Errorf("prefill: %w", err)
	}
	return tokens.JSON(), images, nil
}

// errNoPrefillTokens is a request in another API whose prefill leg is
// shaped for the tokens-in generate format (use_openai_format false) with
// no render step before it to give the token IDs: a configuration fault.
var errNoPrefillTokens = errors.New("prefill: no token ids for a tokens-in prefill leg (use_openai_format false needs a render step before prefill)")

// prefillHead starts a fresh prefill body, `{"request_id":...,"model":...`,
// and the client's cache_salt, so a salted request's prefix never lands in
// the prefill pool's shared cache (the reference drops it there; a
// tenant-isolation gap).
func prefillHead(b *jsonbody.Segments, rc *steps.RequestContext, doc *requestbody.Document) {
	head := make([]byte, 0, 64+len(rc.LegID())+len(rc.Model))
	head = append(head, `{"request_id":`...)
	head = jsonbody.AppendString(head, rc.LegID())
	head = append(head, `,"model":`...)
	head = jsonbody.AppendString(head, rc.Model)
	b.Write(head)
	if salt, ok := doc.Root().Get("cache_salt"); ok && !jsonbody.IsNull(salt) {
		b.WriteString(`,"cache_salt":`)
		b.Ref(salt)
	}
}

// appendPrefillFeatures adds ,"features":{...} with tensors (kept by
// reference) when there are images.
func appendPrefillFeatures(b *jsonbody.Segments, images []features.MultimodalEntry) {
	if len(images) == 0 {
		return
	}
	b.WriteString(`,"features":`)
	features.AppendSegments(b, images)
}

// completionsPrompt is the prompt of a completions prefill leg: the token
// IDs when there are some, else the client's prompt value as sent (null
// when it has none).
func completionsPrompt(rc *steps.RequestContext, doc *requestbody.Document) []byte {
	if rc.Tokens.Len() > 0 {
		return rc.Tokens.JSON()
	}
	if raw, ok := doc.Root().Get(bodykeys.Prompt); ok {
		return raw
	}
	return []byte("null")
}

var _ steps.Step = (*Prefill)(nil)
