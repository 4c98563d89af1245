package tokens

import (
	"context"
	"strconv"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
	"github.com/coordinator-project/coordinator/internal/jsonbody"
	"github.com/coordinator-project/coordinator/internal/requestbody"
	"github.com/coordinator-project/coordinator/internal/wire/bodykeys"
	"github.com/coordinator-project/coordinator/internal/wire/features"
	"github.com/coordinator-project/coordinator/internal/wire/legs"
	"github.com/coordinator-project/coordinator/steps"
)

// NewRequestContext builds the request context of a tokens input: format
// generate, the body appendTokensBody writes, and the prompt's token IDs and
// images already typed (render's generate branch, when configured, checks
// the body and takes the same values from it). The token IDs' JSON is the
// body's own token_ids, so no leg encodes them again. The caller adds the
// forwarded headers (Header), which the service's policy decides.
func NewRequestContext(ctx context.Context, id, legID string, in *coordinatorv1.TokensRequest, stream bool) *steps.RequestContext {
	body, idsAt, idsEnd := writeTokensBody(nil, legID, in, stream)
	return &steps.RequestContext{
		RequestID:    id,
		LegRequestID: legID,
		Format:       legs.FormatGenerate,
		Body:         body,
		Model:        in.GetModel(),
		Stream:       stream,
		Tokens:       requestbody.NewTokensEncoded(in.GetTokenIds(), body[idsAt:idsEnd:idsEnd]),
		Multimodal:   multimodalEntries(in.GetFeatures()),
	}
}

// appendTokensBody appends the vLLM GenerateRequest body of a tokens input:
//
//	{"request_id":..,"model":..,"token_ids":[..],
//	 "features":{"mm_hashes":{"image":[..]},"mm_placeholders":{"image":[{"offset":..,"length":..}]},
//	             "kwargs_data":{"image":[".."|null]}},
//	 "sampling_params":{..only the fields set..},
//	 "cache_salt":..,"stream":..,"stream_options":{"include_usage":true}}
//
// features only with images (kwargs_data only when given), cache_salt only
// when set, stream_options only when streaming (so the last event carries
// the usage).
func appendTokensBody(b []byte, id string, in *coordinatorv1.TokensRequest, stream bool) []byte {
	b, _, _ = writeTokensBody(b, id, in, stream)
	return b
}

// writeTokensBody is appendTokensBody, which also says where in b the
// token_ids array is.
func writeTokensBody(b []byte, id string, in *coordinatorv1.TokensRequest, stream bool) (_ []byte, idsAt, idsEnd int) {
	ids := in.GetTokenIds()
	if b == nil {
		b = make([]byte, 0, 256+len(id)+len(in.GetModel())+11*len(ids)+len(in.GetCacheSalt())+featuresSize(in.GetFeatures()))
	}
	b = append(b, `{"request_id":`...)
	b = jsonbody.AppendString(b, id)
	b = append(b, `,"model":`...)
	b = jsonbody.AppendString(b, in.GetModel())
	b = append(b, `,"token_ids":`...)
	idsAt = len(b)
	b = jsonbody.AppendUint32s(b, ids)
	idsEnd = len(b)
	if f := in.GetFeatures(); len(f.GetMmHashes()) > 0 {
		b = append(b, `,"features":`...)
		b = features.Append(b, multimodalEntries(f), len(f.GetKwargsData()) > 0)
	}
	b = append(b, `,"sampling_params":`...)
	b = appendSamplingParams(b, in.GetSampling())
	if in.GetCacheSalt() != "" {
		b = append(b, `,"cache_salt":`...)
		b = jsonbody.AppendString(b, in.GetCacheSalt())
	}
	if stream {
		return append(b, `,"stream":true,"stream_options":{"include_usage":true}}`...), idsAt, idsEnd
	}
	return append(b, `,"stream":false}`...), idsAt, idsEnd
}

// appendSamplingParams appends the sampling_params object: the fields set,
// in field order ({} when none is).
func appendSamplingParams(b []byte, p *coordinatorv1.SamplingParams) []byte {
	if p == nil {
		return append(b, "{}"...)
	}
	w := samplingWriter{b: append(b, '{')}
	w.start = len(w.b)
	w.sampling(p)
	w.penalties(p)
	return append(w.b, '}')
}

// samplingWriter appends the members of a sampling_params object after
// start, a comma before each but the first.
type samplingWriter struct {
	b     []byte
	start int
}

func (w *samplingWriter) key(name string) {
	if len(w.b) > w.start {
		w.b = append(w.b, ',')
	}
	w.b = append(w.b, '"')
	w.b = append(w.b, name...)
	w.b = append(w.b, `":`...)
}

func (w *samplingWriter) uintField(name string, v uint32) {
	w.key(name)
	w.b = strconv.AppendUint(w.b, uint64(v), 10)
}

func (w *samplingWriter) floatField(name string, v float32) {
	w.key(name)
	w.b = appendFloat32(w.b, v)
}

// sampling appends the fields from max_tokens to n, in field order.
func (w *samplingWriter) sampling(p *coordinatorv1.SamplingParams) {
	if p.MaxTokens != nil {
		w.uintField(bodykeys.MaxTokens, p.GetMaxTokens())
	}
	if p.MinTokens != nil {
		w.uintField("min_tokens", p.GetMinTokens())
	}
	if p.Temperature != nil {
		w.floatField("temperature", p.GetTemperature())
	}
	if p.TopP != nil {
		w.floatField("top_p", p.GetTopP())
	}
	if p.TopK != nil {
		w.key("top_k")
		w.b = strconv.AppendInt(w.b, int64(p.GetTopK()), 10)
	}
	if p.MinP != nil {
		w.floatField("min_p", p.GetMinP())
	}
	if p.Seed != nil {
		w.key("seed")
		w.b = strconv.AppendInt(w.b, p.GetSeed(), 10)
	}
	if len(p.GetStopTokenIds()) > 0 {
		w.key("stop_token_ids")
		w.b = jsonbody.AppendUint32s(w.b, p.GetStopTokenIds())
	}
	if p.GetIgnoreEos() {
		w.key("ignore_eos")
		w.b = append(w.b, "true"...)
	}
	if p.Logprobs != nil {
		w.uintField(bodykeys.Logprobs, p.GetLogprobs())
	}
	if p.PromptLogprobs != nil {
		w.uintField(bodykeys.PromptLogprobs, p.GetPromptLogprobs())
	}
	if p.GetN() != 0 {
		w.uintField(bodykeys.N, p.GetN())
	}
}

// penalties appends the three penalties, in field order.
func (w *samplingWriter) penalties(p *coordinatorv1.SamplingParams) {
	if p.PresencePenalty != nil {
		w.floatField("presence_penalty", p.GetPresencePenalty())
	}
	if p.FrequencyPenalty != nil {
		w.floatField("frequency_penalty", p.GetFrequencyPenalty())
	}
	if p.RepetitionPenalty != nil {
		w.floatField("repetition_penalty", p.GetRepetitionPenalty())
	}
}

// appendFloat32 appends v as the shortest decimal that reads back as the
// same float32 (0.7, not 0.699999988079071). The request's validation
// rules keep NaN and infinities out.
func appendFloat32(b []byte, v float32) []byte {
	return strconv.AppendFloat(b, float64(v), 'g', -1, 32)
}

// appendKwargs appends one kwargs_data item: its tensor string, or null
// when the worker takes the image from its encoder cache.
func appendKwargs(b []byte, k *coordinatorv1.KwargsItem) []byte {
	if k.Data == nil {
		return append(b, "null"...)
	}
	return jsonbody.AppendString(b, k.GetData())
}

// featuresSize estimates the JSON size of the features object.
func featuresSize(f *coordinatorv1.MultimodalFeatures) int {
	n := 0
	for _, h := range f.GetMmHashes() {
		n += len(h) + 64
	}
	for _, k := range f.GetKwargsData() {
		n += len(k.GetData()) + 8
	}
	return n
}

// multimodalEntries types the request's images for the steps, as render's
// generate branch reads them from the body.
func multimodalEntries(f *coordinatorv1.MultimodalFeatures) []features.MultimodalEntry {
	hashes := f.GetMmHashes()
	if len(hashes) == 0 {
		return nil
	}
	placeholders, kwargs := f.GetMmPlaceholders(), f.GetKwargsData()
	entries := make([]features.MultimodalEntry, len(hashes))
	for i, h := range hashes {
		e := features.MultimodalEntry{Index: i, Hash: h, KwargsData: []byte("null")}
		if i < len(placeholders) { // parallel: the request's rules checked it
			e.Placeholder = features.Placeholder{Offset: int(placeholders[i].GetOffset()), Length: int(placeholders[i].GetLength())}
		}
		if i < len(kwargs) {
			e.KwargsData = appendKwargs(nil, kwargs[i])
		}
		entries[i] = e
	}
	return entries
}
