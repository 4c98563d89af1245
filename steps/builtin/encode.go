package builtin

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/coordinator-project/coordinator/connectors/ec"
	"github.com/coordinator-project/coordinator/internal/gateway"
	"github.com/coordinator-project/coordinator/internal/jsonbody"
	"github.com/coordinator-project/coordinator/internal/params"
	"github.com/coordinator-project/coordinator/internal/requestbody"
	"github.com/coordinator-project/coordinator/internal/wire/bodykeys"
	"github.com/coordinator-project/coordinator/internal/wire/features"
	"github.com/coordinator-project/coordinator/internal/wire/imageparts"
	"github.com/coordinator-project/coordinator/internal/wire/legs"
	"github.com/coordinator-project/coordinator/steps"
)

// EncodeType is the encode step's config name.
const EncodeType = "encode"

// Encode runs the vision encoder for each image of the prompt on an encode
// worker through the gateway (EPP-Profile: encode), one leg per multimodal
// entry, concurrently, and keeps the ec_transfer_params each worker answers
// with in RequestContext.ECDescriptors for the prefill step's EC connector.
//
// It does nothing for a prompt without images, and for a tokens-in
// (generate) request, whose prefill worker encodes inline from kwargs_data.
type Encode struct {
	gateway         *gateway.Client
	maxParallel     int
	useOpenAIFormat bool
}

// encodeParams are the encode step's params.
type encodeParams struct {
	// MaxParallel caps the legs of one request in flight at once
	// (default 8, > 0). The first failing leg cancels the others.
	MaxParallel int `param:"max_parallel"`
	// UseOpenAIFormat sends the legs in the client's API when true and in
	// the tokens-in generate format when false (completions requests
	// never have images).
	UseOpenAIFormat bool `param:"use_openai_format"`
	// ECConnector is accepted for compatibility: the connector that merges
	// the encoders' ec_transfer_params is the prefill step's.
	ECConnector string `param:"ec_connector"`
}

func (p *encodeParams) validate() error {
	if p.MaxParallel <= 0 {
		return fmt.Errorf("max_parallel: must be > 0, got %d", p.MaxParallel)
	}
	return nil
}

// NewEncodePlugin registers the encode step type.
func NewEncodePlugin(gateway *gateway.Client, ecs *ec.Set) steps.Plugin {
	return steps.Plugin{Type: EncodeType, New: func(raw map[string]any) (steps.Step, error) {
		p := encodeParams{MaxParallel: 8}
		if err := params.Decode(raw, &p); err != nil {
			return nil, err
		}
		if err := p.validate(); err != nil {
			return nil, err
		}
		if _, err := ecs.Get(p.ECConnector); err != nil {
			return nil, err // the merge happens in prefill, but a bad name fails here too
		}
		return &Encode{gateway: gateway, maxParallel: p.MaxParallel, useOpenAIFormat: p.UseOpenAIFormat}, nil
	}}
}

// Execute implements Step. On success rc.ECDescriptors has one element per
// multimodal entry, in entry order; on failure it is left as it was.
func (e *Encode) Execute(ctx context.Context, rc *steps.RequestContext) error {
	// No encode leg for generate (its features come with the request) nor
	// for an API whose prefill leg cannot take the encoder cache's params:
	// the prefill worker encodes its images itself.
	if len(rc.Multimodal) == 0 || rc.Format == legs.FormatGenerate || !rc.Format.TakesECParams() {
		return nil
	}
	format := legs.ResolveFormat(rc.Format, e.useOpenAIFormat)
	for i, entry := range rc.Multimodal {
		if entry.Placeholder.Length < 0 {
			return fmt.Errorf("encode[%d]: negative placeholder length %d", i, entry.Placeholder.Length)
		}
	}
	var images []*jsonbody.Object
	if format == legs.FormatChat {
		var err error
		if images, err = imageURLObjects(rc); err != nil {
			return err
		}
	}
	descriptors := make([]json.RawMessage, len(rc.Multimodal))
	err := fanOut(ctx, len(rc.Multimodal), e.maxParallel, func(ctx context.Context, i int) error {
		var image *jsonbody.Object
		if idx := rc.Multimodal[i].Index; idx >= 0 && idx < len(images) {
			image = images[idx]
		}
		d, err := e.leg(ctx, rc, format, i, encodeBody(rc, format, i, image))
		descriptors[i] = d
		return err
	})
	if err != nil {
		return err
	}
	rc.ECDescriptors = descriptors
	return nil
}

// leg posts one encode body and returns the worker's ec_transfer_params:
// a non-empty JSON object, or nil when it sent none.
func (e *Encode) leg(ctx context.Context, rc *steps.RequestContext, format legs.Format, i int, body [][]byte) (json.RawMessage, error) {
	name := fmt.Sprintf("%s[%d]", EncodeType, i)
	resp, err := e.gateway.Post(ctx, gateway.Request{
		Leg:       name,
		Path:      format.Path(),
		Profile:   gateway.ProfileEncode,
		RequestID: rc.LegID(),
		Header:    rc.Header,
		Parts:     body,
		Retry:     true,
	})
	if err != nil {
		return nil, err
	}
	desc, err := legs.AnswerParams(resp, name, bodykeys.ECTransferParams)
	if err != nil || desc == nil {
		return nil, err
	}
	if obj, err := jsonbody.ParseObject(desc); err != nil || obj.Len() == 0 {
		return nil, nil // {}: no descriptor
	}
	return desc, nil
}

// imageURLObjects returns the "image_url" object of each image part of a
// chat body as it stands, in document order.
func imageURLObjects(rc *steps.RequestContext) ([]*jsonbody.Object, error) {
	doc, err := rc.Document()
	if err != nil {
		return nil, err
	}
	var images []*jsonbody.Object
	_ = doc.ImageParts().Each(doc.Root(), func(_ int, p imageparts.Part) error {
		images = append(images, p.ImageURL)
		return nil
	})
	return images, nil
}

// encodeBody writes the body of the i-th encode leg. Its prompt is the
// image alone: token_ids are the prompt's first token then the image's
// placeholder token once per placeholder position, and the features place
// the image right after that first token. Chat legs carry the image_url
// object (image, by reference to the client's bytes where unchanged;
// {"url":""} when the body has no such part) and the tokens extension;
// generate and completions legs carry the preprocessed tensor in
// features.kwargs_data instead. Every leg asks for one token, unstreamed.
func encodeBody(rc *steps.RequestContext, format legs.Format, i int, image *jsonbody.Object) [][]byte {
	entry := rc.Multimodal[i]
	ids := jsonbody.AppendUint32s(nil, encodeTokenIDs(&rc.Tokens, entry.Placeholder))
	alone := []features.MultimodalEntry{{
		Hash:        entry.Hash,
		KwargsData:  entry.KwargsData,
		Placeholder: features.Placeholder{Offset: 1, Length: entry.Placeholder.Length},
	}}
	var b jsonbody.Segments
	head := make([]byte, 0, 96+len(rc.Model))
	head = append(head, `{"model":`...)
	b.Write(jsonbody.AppendString(head, rc.Model))
	switch format {
	case legs.FormatChat:
		b.WriteString(`,"messages":[{"role":"user","content":[{"type":"image_url","image_url":`)
		if image == nil {
			b.WriteString(`{"url":""}`)
		} else {
			image.AppendSegments(&b)
		}
		b.WriteString(`}]}],"tokens":`)
		b.Write(features.AppendTokens(nil, ids, alone))
		b.WriteString(`,"max_tokens":1,"stream":false}`)
	case legs.FormatGenerate:
		b.WriteString(`,"token_ids":`)
		b.Write(ids)
		b.WriteString(`,"features":`)
		features.AppendSegments(&b, alone)
		b.WriteString(`,"sampling_params":{"max_tokens":1},"stream":false}`)
	default: // completions: generate-shaped, capped at the top level
		b.WriteString(`,"token_ids":`)
		b.Write(ids)
		b.WriteString(`,"features":`)
		features.AppendSegments(&b, alone)
		b.WriteString(`,"max_tokens":1,"stream":false}`)
	}
	return b.Parts()
}

// encodeTokenIDs is an encode leg's prompt: [BOS] + [P] × p.Length, where
// BOS is the prompt's first token (1 without a prompt) and P the token at
// the image's offset (0 when the offset is outside the prompt). It reads
// those two tokens alone (Tokens.At), so legs may call it concurrently.
func encodeTokenIDs(prompt *requestbody.Tokens, p features.Placeholder) []uint32 {
	bos, placeholder := uint32(1), uint32(0)
	if n := prompt.Len(); n > 0 {
		bos = prompt.At(0)
		if p.Offset >= 0 && p.Offset < n {
			placeholder = prompt.At(p.Offset)
		}
	}
	ids := make([]uint32, 1+p.Length)
	ids[0] = bos
	for j := 1; j < len(ids); j++ {
		ids[j] = placeholder
	}
	return ids
}

// fanOut calls fn(ctx, i) for i in [0, n), at most limit calls at a time.
// The first call to fail cancels ctx for the others (with its error as the
// cause), no call starts after that, and its error is returned. A parent
// ctx that ends before every call started ends the fan-out with ctx's
// cause. fanOut returns only once every call it started has returned.
func fanOut(ctx context.Context, n, limit int, fn func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	sem := make(chan struct{}, min(limit, n))
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	started := 0
	for i := range n {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		started++
		wg.Go(func() {
			defer func() { <-sem }()
			if err := fn(ctx, i); err != nil {
				once.Do(func() {
					first = err
					cancel(err)
				})
			}
		})
	}
	wg.Wait()
	switch {
	case first != nil:
		return first
	case started < n:
		return context.Cause(ctx)
	}
	return nil
}

var _ steps.Step = (*Encode)(nil)
