package builtin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"time"

	"go.uber.org/fx"

	"github.com/coordinator-project/coordinator/internal/gateway"
	"github.com/coordinator-project/coordinator/internal/jsonbody"
	"github.com/coordinator-project/coordinator/internal/params"
	"github.com/coordinator-project/coordinator/internal/requestbody"
	"github.com/coordinator-project/coordinator/internal/tlsfiles"
	"github.com/coordinator-project/coordinator/internal/wire/bodykeys"
	"github.com/coordinator-project/coordinator/internal/wire/features"
	"github.com/coordinator-project/coordinator/internal/wire/legs"
	"github.com/coordinator-project/coordinator/steps"
)

// RenderType is the render step's config name.
const RenderType = "render"

// maxRenderAnswer bounds the render service's answer. A chat render carries
// about 1 MB of base64 tensor per HD image, more than the compressed image
// it came from, so the bound is several times the inbound body cap.
const maxRenderAnswer = 256 << 20

// Render turns the prompt into token IDs and multimodal entries
// (RequestContext.Tokens and Multimodal), by the client's API:
//
//   - chat: POST <address>/v1/chat/completions/render with the body as it
//     stands; the answer gives the token IDs and each image's mm_hash,
//     placeholder and kwargs_data tensor, matched in order with the entries
//     replace-media-urls seeded (or seeding them when none were, decision D7);
//   - completions: a string prompt is rendered through
//     <address>/v1/completions/render and the body's "prompt" replaced by
//     the token IDs; a token-array prompt is validated and used as is;
//   - generate: no call; the body's token_ids and features are validated and
//     used as is.
//
// The body is never re-encoded: only a rendered completions prompt changes.
// The render service is called directly (not through the gateway) with the
// forwarded client headers and x-request-id (decision D5); any 2xx answer is
// accepted (D9). Client faults, including the token and placeholder limits,
// are ErrInvalidRequest; a non-2xx answer is an *gateway.StatusError; a
// malformed answer is a plain error.
type Render struct {
	client          *gateway.Client
	maxTokens       int
	maxPlaceholders int
	maxEntries      int
}

// renderParams are the render step's params.
type renderParams struct {
	// Address is the render service's base URL (required): an http(s) URL
	// with a host, e.g. http://localhost:8000.
	Address string `param:"address"`
	// Timeout bounds a whole render call, answer body included. 0: none.
	Timeout time.Duration `param:"timeout"`
	// MaxIdleConnsPerHost caps the render client's keep-alive pool.
	MaxIdleConnsPerHost int `param:"max_idle_conns_per_host"`
	// IdleConnTimeout closes idle keep-alive connections.
	IdleConnTimeout time.Duration `param:"idle_conn_timeout"`
	// ConnectTimeout bounds opening a connection (dial and TLS handshake).
	ConnectTimeout time.Duration `param:"connect_timeout"`
	// Retry resends a render call that got no answer (refused, reset before
	// the headers) or a 502/503 answer (see gateway.Retry).
	Retry gateway.Retry `param:"retry"`
	// MaxTotalTokens rejects prompts with more tokens (400). 0: unlimited.
	MaxTotalTokens int `param:"max_total_tokens"`
	// MaxTotalPlaceholderTokens rejects prompts whose image placeholders add
	// up to more tokens (400). 0: unlimited.
	MaxTotalPlaceholderTokens int `param:"max_total_placeholder_tokens"`
	// MaxMultimodalEntries rejects a chat whose images render seeded (no
	// replace-media-urls step before it, D7) when there are more (400),
	// before any encode leg. 0: unlimited. Default 64, as
	// replace-media-urls' max_multimodal_entries.
	MaxMultimodalEntries int `param:"max_multimodal_entries"`
	// TLS is the https client's CAs, certificate and server name, reloaded
	// when the files change; only with an https address.
	TLS tlsfiles.ClientConfig `param:"tls"`
}

func defaultRenderParams() renderParams {
	return renderParams{
		Timeout:              30 * time.Second,
		MaxIdleConnsPerHost:  100,
		IdleConnTimeout:      90 * time.Second,
		ConnectTimeout:       gateway.DefaultConnectTimeout,
		Retry:                gateway.DefaultRetry,
		MaxMultimodalEntries: DefaultMaxMultimodalEntries,
	}
}

// Validate checks the params; errors name the key.
func (p *renderParams) Validate() error {
	if p.Address == "" {
		return errors.New("address: required (the render service's URL, e.g. http://localhost:8000)")
	}
	u, err := url.Parse(p.Address)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("address: must be an http(s) URL with a host, got %q", p.Address)
	}
	switch {
	case p.Timeout < 0:
		return fmt.Errorf("timeout: must not be negative, got %v", p.Timeout)
	case p.MaxIdleConnsPerHost < 0:
		return fmt.Errorf("max_idle_conns_per_host: must not be negative, got %d", p.MaxIdleConnsPerHost)
	case p.IdleConnTimeout < 0:
		return fmt.Errorf("idle_conn_timeout: must not be negative, got %v", p.IdleConnTimeout)
	case p.ConnectTimeout <= 0:
		return fmt.Errorf("connect_timeout: must be positive, got %v", p.ConnectTimeout)
	case p.MaxTotalTokens < 0:
		return fmt.Errorf("max_total_tokens: must not be negative, got %d", p.MaxTotalTokens)
	case p.MaxTotalPlaceholderTokens < 0:
		return fmt.Errorf("max_total_placeholder_tokens: must not be negative, got %d", p.MaxTotalPlaceholderTokens)
	case p.MaxMultimodalEntries < 0:
		return fmt.Errorf("max_multimodal_entries: must not be negative, got %d", p.MaxMultimodalEntries)
	case p.TLS.Enabled() && u.Scheme != "https":
		return fmt.Errorf("tls: set but address %q is not https", p.Address)
	}
	if err := p.TLS.Validate(); err != nil {
		return fmt.Errorf("tls.%w", err)
	}
	if err := p.Retry.Validate(); err != nil {
		return fmt.Errorf("retry.%w", err)
	}
	return nil
}

// renderTLSFileSet names the render client's TLS files in logs and metrics.
const renderTLSFileSet = "render.tls"

// RenderDeps are the render step's optional dependencies: where its TLS
// files' reloads (and an insecure_skip_verify warning) are reported.
type RenderDeps struct {
	fx.In
	// Log gets the TLS reload lines; nil discards them.
	Log *slog.Logger `optional:"true"`
	// TLSReloads counts the TLS reloads (file set render.tls); nil: none.
	TLSReloads tlsfiles.Observer `optional:"true"`
}

// NewRenderPlugin registers the render step type. Each render step builds
// its own client to the render service from its params.
func NewRenderPlugin(deps RenderDeps) steps.Plugin {
	return steps.Plugin{Type: RenderType, New: func(raw map[string]any) (steps.Step, error) {
		p := defaultRenderParams()
		if err := params.Decode(raw, &p); err != nil {
			return nil, err
		}
		if err := p.Validate(); err != nil {
			return nil, err
		}
		opts := gateway.Options{
			Address:             p.Address,
			MaxIdleConnsPerHost: p.MaxIdleConnsPerHost,
			IdleConnTimeout:     p.IdleConnTimeout,
			Timeout:             p.Timeout,
			ConnectTimeout:      p.ConnectTimeout,
			Retry:               p.Retry,
		}
		if p.TLS.Enabled() {
			files, err := tlsfiles.NewClient(p.TLS, tlsfiles.Options{Name: renderTLSFileSet, Log: deps.Log, Observer: deps.TLSReloads})
			if err != nil {
				return nil, fmt.Errorf("tls.%w", err)
			}
			opts.TLS = files.TLSConfig
		}
		client, err := gateway.New(opts)
		if err != nil {
			return nil, err
		}
		return &Render{client: client, maxTokens: p.MaxTotalTokens, maxPlaceholders: p.MaxTotalPlaceholderTokens, maxEntries: p.MaxMultimodalEntries}, nil
	}}
}

// Close releases the render client's idle connections.
func (r *Render) Close() { r.client.Close() }

// Execute implements Step.
func (r *Render) Execute(ctx context.Context, rc *steps.RequestContext) error {
	switch rc.Format {
	case legs.FormatChat:
		return r.chat(ctx, rc)
	case legs.FormatCompletions:
		return r.completions(ctx, rc)
	case legs.FormatGenerate:
		return r.generate(rc)
	}
	return nil // another API carries no prompt to render
}

// chat renders a chat body and enriches (or seeds) the multimodal entries.
func (r *Render) chat(ctx context.Context, rc *steps.RequestContext) error {
	doc, err := rc.Document()
	if err != nil {
		return err
	}
	answer, err := r.post(ctx, rc, legs.PathChat, doc.Write(doc.Root()))
	if err != nil {
		return err
	}
	obj, err := jsonbody.ParseIndexed(answer, renderAnswerIndex)
	if err != nil {
		return fmt.Errorf("render: decode answer: %w", err)
	}
	tokens, err := answerTokens(obj)
	if err != nil {
		return err
	}
	if err := r.checkTokens(tokens.Len()); err != nil {
		return err
	}
	rawFeatures, _ := obj.Get(bodykeys.Features)
	rendered, err := features.Parse(rawFeatures, obj.Object(bodykeys.Features))
	if err != nil {
		return fmt.Errorf("render: decode answer: %w", err)
	}
	if len(rc.Multimodal) == 0 && r.maxEntries > 0 && len(rendered) > r.maxEntries {
		return legs.Invalidf("too many multimodal entries: got %d, max %d", len(rendered), r.maxEntries)
	}
	entries, err := enrichEntries(rc.Multimodal, rendered)
	if err != nil {
		return err
	}
	if err := r.checkPlaceholders(entries); err != nil {
		return err
	}
	rc.Tokens, rc.Multimodal = tokens, entries
	return nil
}

// renderAnswerIndex indexes a render answer: its token IDs and features.
var renderAnswerIndex = &jsonbody.Index{Members: map[string]*jsonbody.Index{
	bodykeys.TokenIDs: {Uint32s: true},
	bodykeys.Features: features.Index,
}}

// enrichEntries gives the seeded entries render's hash, tensor and
// placeholder, in order. With nothing seeded (no replace-media-urls step),
// render's entries are the entries (decision D7).
func enrichEntries(seeded, rendered []features.MultimodalEntry) ([]features.MultimodalEntry, error) {
	if len(seeded) == 0 {
		return rendered, nil
	}
	if len(rendered) != len(seeded) {
		return nil, fmt.Errorf("render returned %d mm_hashes but expected %d", len(rendered), len(seeded))
	}
	out := make([]features.MultimodalEntry, len(seeded))
	for i, e := range seeded {
		e.Hash = rendered[i].Hash
		e.KwargsData = rendered[i].KwargsData
		e.Placeholder = rendered[i].Placeholder
		out[i] = e
	}
	return out, nil
}

// completions handles the completions prompt shapes: a string is rendered,
// a token array is validated, anything else is the client's fault.
func (r *Render) completions(ctx context.Context, rc *steps.RequestContext) error {
	doc, err := rc.Document()
	if err != nil {
		return err
	}
	prompt, ok := doc.Root().Get(bodykeys.Prompt)
	if !ok {
		return legs.Invalidf("prompt must be a string or token array")
	}
	switch prompt[0] {
	case '"':
		return r.renderPrompt(ctx, rc, doc)
	case '[':
		return r.tokenPrompt(rc, doc.Root().Array(bodykeys.Prompt))
	}
	return legs.Invalidf("prompt must be a string or token array")
}

// renderPrompt renders a string prompt and replaces it with its token IDs.
func (r *Render) renderPrompt(ctx context.Context, rc *steps.RequestContext, doc *requestbody.Document) error {
	answer, err := r.post(ctx, rc, legs.PathCompletions, doc.Write(doc.Root()))
	if err != nil {
		return err
	}
	elems, err := jsonbody.ParseArrayIndexed(answer, &jsonbody.Index{Elements: renderAnswerIndex})
	if err != nil {
		return fmt.Errorf("render: decode answer: %w", err)
	}
	if elems.Len() != 1 {
		return fmt.Errorf("render: expected 1 answer element, got %d", elems.Len())
	}
	elem := elems.Object(0)
	if elem == nil {
		_, err := jsonbody.ParseObject(elems.Elem(0)) // the error it makes
		return fmt.Errorf("render: decode answer: %w", err)
	}
	tokens, err := answerTokens(elem)
	if err != nil {
		return err
	}
	if err := r.checkTokens(tokens.Len()); err != nil {
		return err
	}
	doc.Root().Set(bodykeys.Prompt, tokens.JSON())
	rc.Tokens = tokens
	return nil
}

// tokenPrompt takes a token-array prompt as the token IDs, unchanged: as
// the client's bytes when they are written as the legs write token IDs.
// The document's pass counted and checked the array, so the limit is
// enforced and a bad token reported without decoding anything; the
// reference checks the limit before the elements, and so does this.
func (r *Render) tokenPrompt(rc *steps.RequestContext, prompt *jsonbody.Array) error {
	st, _ := prompt.Uint32Stats()
	switch {
	case st.Len == 0:
		rc.Tokens = requestbody.NewTokens([]uint32{})
		return nil
	case st.First == '"':
		return legs.Invalidf("batched string prompts are not supported")
	case st.First == '[':
		return legs.Invalidf("batched token prompts are not supported")
	case st.First != '-' && (st.First < '0' || st.First > '9'):
		return legs.Invalidf("invalid prompt array element at index 0")
	}
	if err := r.checkTokens(st.Len); err != nil {
		return err
	}
	if st.Bad >= 0 {
		return legs.Invalidf("prompt: invalid token at index %d", st.Bad)
	}
	tokens, err := requestbody.TokensOf(prompt, st)
	if err != nil {
		return legs.Invalidf("prompt: %v", err) // unreachable: the pass checked every token
	}
	rc.Tokens = tokens
	return nil
}

// generate validates a tokens-in body and takes its token IDs and images,
// within the token and placeholder limits.
func (r *Render) generate(rc *steps.RequestContext) error {
	doc, err := rc.Document()
	if err != nil {
		return err
	}
	tokens, entries, err := generatePrompt(doc.Root())
	if err != nil {
		return err
	}
	if err := r.checkTokens(tokens.Len()); err != nil {
		return err
	}
	if err := r.checkPlaceholders(entries); err != nil {
		return err
	}
	rc.Tokens, rc.Multimodal = tokens, entries
	return nil
}

// generatePrompt reads the prompt of a tokens-in (generate) body, obj: its
// token_ids, a non-empty array of non-negative 32-bit integers (the body's
// own bytes when written as legs write them), and its images from
// features, each placeholder within the prompt; sampling_params and its
// extra_args must be objects when present, for the legs to add transfer
// params there. Every error is the client's (ErrInvalidRequest). Render's
// generate branch reads the prompt so; the prefill step too when no render
// step ran.
func generatePrompt(obj *jsonbody.Object) (requestbody.Tokens, []features.MultimodalEntry, error) {
	raw, ok := obj.Get(bodykeys.TokenIDs)
	if !ok || jsonbody.IsNull(raw) {
		return requestbody.Tokens{}, nil, legs.Invalidf("token_ids is required")
	}
	ids := obj.Array(bodykeys.TokenIDs)
	if raw[0] != '[' || ids == nil {
		return requestbody.Tokens{}, nil, legs.Invalidf("token_ids must be an array")
	}
	st, _ := ids.Uint32Stats()
	if st.Bad >= 0 {
		return requestbody.Tokens{}, nil, legs.Invalidf("token_ids: index %d: not a non-negative 32-bit integer", st.Bad)
	}
	if st.Len == 0 {
		return requestbody.Tokens{}, nil, legs.Invalidf("token_ids must not be empty")
	}
	if err := checkSamplingParams(obj); err != nil {
		return requestbody.Tokens{}, nil, err
	}
	rawFeatures, _ := obj.Get(bodykeys.Features)
	entries, err := features.Parse(rawFeatures, obj.Object(bodykeys.Features))
	if err != nil {
		return requestbody.Tokens{}, nil, legs.Invalidf("%v", err)
	}
	if err := features.CheckBounds(entries, st.Len); err != nil {
		return requestbody.Tokens{}, nil, legs.Invalidf("%v", err)
	}
	tokens, err := requestbody.TokensOf(ids, st)
	if err != nil {
		return requestbody.Tokens{}, nil, legs.Invalidf("token_ids: %v", err)
	}
	return tokens, entries, nil
}

// checkSamplingParams checks that sampling_params and its extra_args, when
// present and not null, are objects: later steps add transfer params there.
func checkSamplingParams(obj *jsonbody.Object) error {
	raw, ok := obj.Get(bodykeys.SamplingParams)
	if !ok || jsonbody.IsNull(raw) {
		return nil
	}
	sampling := obj.Object(bodykeys.SamplingParams)
	if sampling == nil {
		return legs.Invalidf("%s must be an object", bodykeys.SamplingParams)
	}
	raw, ok = sampling.Get(bodykeys.ExtraArgs)
	if ok && !jsonbody.IsNull(raw) && raw[0] != '{' {
		return legs.Invalidf("%s.%s must be an object", bodykeys.SamplingParams, bodykeys.ExtraArgs)
	}
	return nil
}

// post sends body, the document as it stands, to <address><path>/render
// and returns the whole answer.
func (r *Render) post(ctx context.Context, rc *steps.RequestContext, path string, body [][]byte) ([]byte, error) {
	resp, err := r.client.Post(ctx, gateway.Request{
		Leg:       RenderType,
		Path:      path + "/render",
		RequestID: rc.LegID(),
		Header:    rc.Header,
		Parts:     body,
		Retry:     true,
	})
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	answer, err := legs.ReadBody(ctx, resp, legs.Cap{Leg: RenderType, Max: maxRenderAnswer})
	var tooLarge *legs.TooLargeError
	if errors.As(err, &tooLarge) {
		return nil, err
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("render: %w", context.Cause(ctx))
		}
		return nil, &gateway.TransportError{Leg: RenderType, Err: fmt.Errorf("read answer: %w", err)}
	}
	return answer, nil
}

// answerTokens reads a render answer's token_ids (indexed with
// renderAnswerIndex): as the answer's bytes when they are written as legs
// write token IDs.
func answerTokens(obj *jsonbody.Object) (requestbody.Tokens, error) {
	raw, ok := obj.Get(bodykeys.TokenIDs)
	if !ok {
		return requestbody.Tokens{}, errors.New("render: decode answer: token_ids missing")
	}
	if ids := obj.Array(bodykeys.TokenIDs); ids != nil {
		if st, _ := ids.Uint32Stats(); st.Bad < 0 {
			if tokens, err := requestbody.TokensOf(ids, st); err == nil {
				return tokens, nil
			}
		}
	}
	_, err := jsonbody.Uint32s(raw) // not token IDs: the error that says why
	return requestbody.Tokens{}, fmt.Errorf("render: decode answer: token_ids: %w", err)
}

// checkTokens enforces max_total_tokens.
func (r *Render) checkTokens(n int) error {
	if r.maxTokens > 0 && n > r.maxTokens {
		return legs.Invalidf("too many total tokens: got %d, max %d", n, r.maxTokens)
	}
	return nil
}

// checkPlaceholders enforces max_total_placeholder_tokens; a sum that
// overflows counts as exceeding it.
func (r *Render) checkPlaceholders(entries []features.MultimodalEntry) error {
	if r.maxPlaceholders <= 0 {
		return nil
	}
	if total := features.PlaceholderTotal(entries); total > r.maxPlaceholders {
		return legs.Invalidf("too many placeholder tokens: got %d, max %d", total, r.maxPlaceholders)
	}
	return nil
}

var _ steps.Step = (*Render)(nil)
