package builtin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/internal/gateway"
	"github.com/coordinator-project/coordinator/internal/requestbody"
	"github.com/coordinator-project/coordinator/internal/wire/features"
	"github.com/coordinator-project/coordinator/internal/wire/legs"
	"github.com/coordinator-project/coordinator/steps"
	"github.com/coordinator-project/coordinator/steps/builtin"
	"github.com/coordinator-project/coordinator/steps/steptest"
)

func TestEncodeParams(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		params  map[string]any
		wantErr string
	}{
		{name: "no params"},
		{name: "injected keys", params: map[string]any{"use_openai_format": true, "ec_connector": "ec-nixl", "kv_connector": "kv-nixl"}},
		{name: "max_parallel int", params: map[string]any{"max_parallel": 3}},
		{name: "max_parallel integral float", params: map[string]any{"max_parallel": 8.0}},
		{name: "max_parallel json number", params: map[string]any{"max_parallel": json.Number("4")}},
		{name: "max_parallel zero", params: map[string]any{"max_parallel": 0}, wantErr: "max_parallel: must be > 0, got 0"},
		{name: "max_parallel negative", params: map[string]any{"max_parallel": -1}, wantErr: "max_parallel: must be > 0, got -1"},
		{name: "max_parallel fraction", params: map[string]any{"max_parallel": 8.5}, wantErr: "max_parallel: expected integer, got 8.5"},
		{name: "max_parallel string", params: map[string]any{"max_parallel": "8"}, wantErr: "max_parallel: expected number, got string"},
		{name: "max_parallel out of range", params: map[string]any{"max_parallel": 1e30}, wantErr: "max_parallel: out of range"},
		{name: "use_openai_format string", params: map[string]any{"use_openai_format": "true"}, wantErr: "use_openai_format: expected bool, got string"},
		{name: "ec_connector not a string", params: map[string]any{"ec_connector": 5}, wantErr: "ec_connector: expected string, got int"},
		{name: "unknown key", params: map[string]any{"max_paralel": 3}, wantErr: `unknown key "max_paralel"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			step, err := builtin.NewEncodePlugin(phaseClient(t, "http://127.0.0.1:1"), phaseECSet(t)).New(tt.params)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.NotNil(t, step)
		})
	}
}

func TestEncodeParamErrorsNameTheStep(t *testing.T) {
	t.Parallel()
	plugins := []steps.Plugin{builtin.NewEncodePlugin(phaseClient(t, "http://127.0.0.1:1"), phaseECSet(t))}
	_, err := steps.NewPipeline(plugins, []steps.StepConfig{{Type: builtin.EncodeType, Params: map[string]any{"max_parallel": 0}}}, steps.Defaults{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "pipeline.steps[0] (encode): max_parallel: must be > 0")
}

// TestEncodeFanOut is the reference's ParallelFanOut: one leg per image
// (three here, tokens-in), each with its own hash and tensor, and one EC
// descriptor per image kept in entry order whatever order the legs end in.
func TestEncodeFanOut(t *testing.T) {
	t.Parallel()
	gw := workers(t)
	rc := mmChatContext()
	rc.Multimodal = append(rc.Multimodal, features.MultimodalEntry{Index: 2, Hash: "ghi789hash", KwargsData: json.RawMessage(`"dGVuc29yLTM="`), Placeholder: features.Placeholder{Offset: 7, Length: 1}})
	require.NoError(t, newEncode(t, gw.URL, map[string]any{"use_openai_format": false}).Execute(context.Background(), rc))

	sentLegs := gw.Legs()
	require.Len(t, sentLegs, 3)
	require.Len(t, rc.ECDescriptors, 3)
	for i, e := range rc.Multimodal {
		leg := legByHash(t, sentLegs, e.Hash)
		assert.Equal(t, legs.PathGenerate, leg.Path)
		assertLegHeaders(t, leg, gateway.ProfileEncode, "req-abc-123")
		body := decoded(t, leg.Body)
		assert.Equal(t, "llava", body["model"])
		assert.Equal(t, []any{e.Hash}, at(body, "features", "mm_hashes", "image"))
		kwargs, _ := at(body, "features", "kwargs_data", "image").([]any)
		assert.Len(t, kwargs, 1)
		assert.JSONEq(t, fmt.Sprintf(`{%q:%s}`, e.Hash, descriptor(e.Hash)), string(rc.ECDescriptors[i]), "descriptor %d in entry order", i)
	}
}

func TestEncodeChatFormat(t *testing.T) {
	t.Parallel()
	gw := workers(t)
	rc := mmChatContext()
	require.NoError(t, newEncode(t, gw.URL, map[string]any{"use_openai_format": true}).Execute(context.Background(), rc))

	sentLegs := gw.Legs()
	require.Len(t, sentLegs, 2)
	wantImages := []string{
		`{"url":"data:image/jpeg;base64,/9j/4AAQ","detail":"high"}`,
		`{"url":"data:image/png;base64,iVBORw0K"}`,
	}
	for i, e := range rc.Multimodal {
		leg := legByHash(t, sentLegs, e.Hash)
		assert.Equal(t, legs.PathChat, leg.Path)
		assertLegHeaders(t, leg, gateway.ProfileEncode, "req-abc-123")
		body := decoded(t, leg.Body)
		// One image-only content part: the request's image_url object as sent.
		content, _ := at(body, "messages").([]any)
		require.Len(t, content, 1)
		parts, _ := at(content[0].(map[string]any), "content").([]any)
		require.Len(t, parts, 1)
		assert.Equal(t, "image_url", at(parts[0].(map[string]any), "type"))
		assert.Contains(t, string(leg.Body), `"image_url":`+wantImages[i], "image_url copied byte for byte")
		assert.Equal(t, "user", at(content[0].(map[string]any), "role"))
		// tokens: [BOS] + [P] x length, features without tensors.
		ids, _ := at(body, "tokens", "token_ids").([]any)
		assert.Len(t, ids, 4)
		assert.Equal(t, []any{e.Hash}, at(body, "tokens", "features", "mm_hashes", "image"))
		assert.False(t, hasKey(body, "tokens", "features", "kwargs_data"))
		assert.False(t, hasKey(body, "token_ids"))
		assert.False(t, hasKey(body, "features"))
		// One token, unstreamed, none of the client's sampling fields.
		assert.Equal(t, json.Number("1"), body["max_tokens"])
		assert.Equal(t, false, body["stream"])
		for _, k := range []string{"max_completion_tokens", "min_tokens", "stream_options", "top_k", "kv_transfer_params", "ec_transfer_params"} {
			assert.False(t, hasKey(body, k), k)
		}
	}
	require.Len(t, rc.ECDescriptors, 2)
}

func TestEncodeBuildsTokenIDs(t *testing.T) {
	t.Parallel()
	gw := workers(t)
	rc := mmChatContext()
	rc.Tokens = requestbody.NewTokens([]uint32{1, 32000, 32000, 32000, 9, 9, 9})
	rc.Multimodal = rc.Multimodal[:1]
	require.NoError(t, newEncode(t, gw.URL, map[string]any{"use_openai_format": true}).Execute(context.Background(), rc))
	sentLegs := gw.Legs()
	require.Len(t, sentLegs, 1)
	assert.Equal(t, []any{json.Number("1"), json.Number("32000"), json.Number("32000"), json.Number("32000")}, at(decoded(t, sentLegs[0].Body), "tokens", "token_ids"))
	assert.Contains(t, string(sentLegs[0].Body), `"mm_placeholders":{"image":[{"offset":1,"length":3}]}`)
}

func TestEncodeGenerateFormatCapsSingleToken(t *testing.T) {
	t.Parallel()
	gw := workers(t)
	rc := mmChatContext()
	require.NoError(t, newEncode(t, gw.URL, map[string]any{"use_openai_format": false}).Execute(context.Background(), rc))
	for _, leg := range gw.Legs() {
		body := decoded(t, leg.Body)
		assert.Equal(t, json.Number("1"), at(body, "sampling_params", "max_tokens"))
		assert.False(t, hasKey(body, "sampling_params", "min_tokens"))
		assert.False(t, hasKey(body, "max_tokens"))
		assert.Equal(t, false, body["stream"])
		assert.False(t, hasKey(body, "messages"))
	}
	leg := legByHash(t, gw.Legs(), hash1)
	assert.Contains(t, string(leg.Body), `"kwargs_data":{"image":[null]}`, "an encoder-cache hit is sent as null")
	leg = legByHash(t, gw.Legs(), hash0)
	assert.Contains(t, string(leg.Body), `"kwargs_data":{"image":["dGVuc29yLTE="]}`)
}

func TestEncodeSkips(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		rc   func() *steps.RequestContext
	}{
		{name: "text only", rc: func() *steps.RequestContext {
			rc := mmChatContext()
			rc.Multimodal = nil
			return rc
		}},
		{name: "generate request encodes inline on prefill", rc: func() *steps.RequestContext {
			rc := mmChatContext()
			rc.Format = legs.FormatGenerate
			rc.Body = []byte(`{"model":"llava","token_ids":[1,32000]}`)
			return rc
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			gw := workers(t)
			rc := tt.rc()
			for _, openAI := range []bool{true, false} {
				require.NoError(t, newEncode(t, gw.URL, map[string]any{"use_openai_format": openAI}).Execute(context.Background(), rc))
			}
			assert.Empty(t, gw.Legs())
			assert.Nil(t, rc.ECDescriptors)
		})
	}
}

// TestEncodeECTransferParamsAnswers covers SkipsInvalidECTransferParams and
// EncoderReturnsNoECParams: any answer without a non-empty object is "no
// descriptor", not an error; an answer that is not JSON fails the request.
func TestEncodeECTransferParamsAnswers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		status  int
		answer  string
		want    string // descriptor of every leg; "" means nil
		wantErr bool
	}{
		{name: "object", status: 200, answer: `{"ec_transfer_params":{"h":{"peer_port":"5501"}}}`, want: `{"h":{"peer_port":"5501"}}`},
		{name: "several hashes", status: 200, answer: `{"ec_transfer_params":{"a":1,"b":null}}`, want: `{"a":1,"b":null}`},
		{name: "string", status: 200, answer: `{"ec_transfer_params":"x"}`},
		{name: "array", status: 200, answer: `{"ec_transfer_params":[{"h":{}}]}`},
		{name: "null", status: 200, answer: `{"ec_transfer_params":null}`},
		{name: "number", status: 200, answer: `{"ec_transfer_params":5}`},
		{name: "empty object", status: 200, answer: `{"ec_transfer_params":{ }}`},
		{name: "absent", status: 200, answer: `{"id":"chatcmpl-abc","choices":[]}`},
		{name: "created (D9)", status: 201, answer: `{"ec_transfer_params":{"h":1}}`, want: `{"h":1}`},
		{name: "no content (D9)", status: 204},
		{name: "event stream", status: 200, answer: "data: {}\n\n", wantErr: true},
		{name: "top-level array", status: 200, answer: `[]`, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			gw := steptest.NewGateway(t, func(w http.ResponseWriter, _ *http.Request) {
				w.WriteHeader(tt.status)
				_, _ = w.Write([]byte(tt.answer))
			})
			rc := mmChatContext()
			err := newEncode(t, gw.URL, map[string]any{"use_openai_format": true}).Execute(context.Background(), rc)
			if tt.wantErr {
				require.Error(t, err)
				assert.Contains(t, err.Error(), "decode answer")
				assert.NotErrorIs(t, err, legs.ErrInvalidRequest)
				var se *gateway.StatusError
				assert.NotErrorAs(t, err, &se)
				assert.Nil(t, rc.ECDescriptors)
				return
			}
			require.NoError(t, err)
			assert.Len(t, gw.Legs(), 2)
			require.Len(t, rc.ECDescriptors, 2)
			for _, d := range rc.ECDescriptors {
				if tt.want == "" {
					assert.Nil(t, d)
				} else {
					assert.Equal(t, tt.want, string(d), "kept byte for byte (D15)")
				}
			}
		})
	}
}

func TestEncodeLegFailure(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		status int
	}{
		{name: "server error", status: http.StatusInternalServerError},
		{name: "client error keeps its status", status: http.StatusUnprocessableEntity},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			gw := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
				if legHash(bodyOf(r)) == hash1 {
					w.WriteHeader(tt.status)
					_, _ = w.Write([]byte(`{"error":"boom"}`))
					return
				}
				_, _ = w.Write([]byte(encodeAnswer(hash0)))
			})
			rc := mmChatContext()
			err := newEncode(t, gw.URL, map[string]any{"use_openai_format": true}).Execute(context.Background(), rc)
			var se *gateway.StatusError
			require.ErrorAs(t, err, &se)
			assert.Equal(t, "encode[1]", se.Leg)
			assert.Equal(t, tt.status, se.StatusCode)
			assert.False(t, se.Relay)
			assert.Nil(t, rc.ECDescriptors, "no partial descriptors")
		})
	}
}

func TestEncodePaths(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		format    legs.Format
		useOpenAI bool
		wantPath  string
	}{
		{name: "chat", format: legs.FormatChat, useOpenAI: true, wantPath: legs.PathChat},
		{name: "chat tokens-in", format: legs.FormatChat, useOpenAI: false, wantPath: legs.PathGenerate},
		{name: "completions with images", format: legs.FormatCompletions, useOpenAI: true, wantPath: legs.PathCompletions},
		{name: "completions with images tokens-in", format: legs.FormatCompletions, useOpenAI: false, wantPath: legs.PathCompletions},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			gw := workers(t)
			rc := mmChatContext()
			rc.Format = tt.format
			require.NoError(t, newEncode(t, gw.URL, map[string]any{"use_openai_format": tt.useOpenAI}).Execute(context.Background(), rc))
			sentLegs := gw.Legs()
			require.Len(t, sentLegs, 2)
			for _, l := range sentLegs {
				assert.Equal(t, tt.wantPath, l.Path)
			}
		})
	}
}

func TestEncodeCompletionsLegIsGenerateShapedWithTopLevelCap(t *testing.T) {
	t.Parallel()
	gw := workers(t)
	rc := mmChatContext()
	rc.Format = legs.FormatCompletions
	rc.Multimodal = rc.Multimodal[:1]
	require.NoError(t, newEncode(t, gw.URL, map[string]any{"use_openai_format": true}).Execute(context.Background(), rc))
	sentLegs := gw.Legs()
	require.Len(t, sentLegs, 1)
	assert.JSONEq(t, `{"model":"llava","token_ids":[1,32000,32000,32000],`+
		`"features":{"mm_hashes":{"image":["abc123hash"]},"mm_placeholders":{"image":[{"offset":1,"length":3}]},"kwargs_data":{"image":["dGVuc29yLTE="]}},`+
		`"max_tokens":1,"stream":false}`, string(sentLegs[0].Body))
}

func TestEncodeChatImageLookup(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		body      string
		index     int
		wantImage string
	}{
		{
			name: "image parts counted across messages, other parts skipped",
			body: `{"messages":[{"role":"system","content":"be brief"},{"role":"user","content":[{"type":"image_url","image_url":{"url":"a"}},` +
				`{"type":"text","text":"x"},{"type":"input_audio"}]},{"role":"user","content":[{"type":"image_url","image_url":{"url":"b", "uuid" : "c1"}}]}]}`,
			index:     1,
			wantImage: `{"url":"b", "uuid" : "c1"}`,
		},
		{
			name:      "missing part gives an empty url",
			body:      `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"a"}}]}]}`,
			index:     3,
			wantImage: `{"url":""}`,
		},
		{
			name:      "no messages",
			body:      `{"model":"m"}`,
			index:     0,
			wantImage: `{"url":""}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			gw := workers(t)
			rc := mmChatContext()
			rc.Body = []byte(tt.body)
			rc.Multimodal = []features.MultimodalEntry{{Index: tt.index, Hash: hash0, Placeholder: features.Placeholder{Offset: 1, Length: 1}}}
			require.NoError(t, newEncode(t, gw.URL, map[string]any{"use_openai_format": true}).Execute(context.Background(), rc))
			sentLegs := gw.Legs()
			require.Len(t, sentLegs, 1)
			assert.Contains(t, string(sentLegs[0].Body), `"content":[{"type":"image_url","image_url":`+tt.wantImage+`}]`)
		})
	}
}

func TestEncodeRejectsBeforeSending(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		edit        func(rc *steps.RequestContext)
		wantInvalid bool
	}{
		{name: "chat body not an object", edit: func(rc *steps.RequestContext) { rc.Body = []byte(`[1]`) }, wantInvalid: true},
		{name: "negative placeholder length", edit: func(rc *steps.RequestContext) { rc.Multimodal[1].Placeholder.Length = -1 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			gw := workers(t)
			rc := mmChatContext()
			tt.edit(rc)
			err := newEncode(t, gw.URL, map[string]any{"use_openai_format": true}).Execute(context.Background(), rc)
			require.Error(t, err)
			if tt.wantInvalid {
				assert.ErrorIs(t, err, legs.ErrInvalidRequest)
			} else {
				assert.NotErrorIs(t, err, legs.ErrInvalidRequest)
			}
			assert.Empty(t, gw.Legs())
			assert.Nil(t, rc.ECDescriptors)
		})
	}
}
