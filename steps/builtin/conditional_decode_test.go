package builtin_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/internal/gateway"
	"github.com/coordinator-project/coordinator/internal/headers"
	"github.com/coordinator-project/coordinator/internal/requestbody"
	"github.com/coordinator-project/coordinator/internal/wire/features"
	"github.com/coordinator-project/coordinator/internal/wire/legs"
	"github.com/coordinator-project/coordinator/internal/wire/pd"
	"github.com/coordinator-project/coordinator/steps"
	"github.com/coordinator-project/coordinator/steps/builtin"
	"github.com/coordinator-project/coordinator/steps/steptest"
)

func newConditionalDecode(t *testing.T, url string, params map[string]any) steps.Step {
	t.Helper()
	step, err := builtin.NewConditionalDecodePlugin(phaseClient(t, url)).New(params)
	require.NoError(t, err)
	return step
}

// workerAnswer is a fake gateway answering status with a JSON body.
func workerAnswer(t *testing.T, status int, body string) *steptest.Gateway {
	t.Helper()
	return steptest.NewGateway(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	})
}

func TestConditionalDecodeParams(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		params  map[string]any
		wantErr string
	}{
		{name: "no params", params: nil},
		{name: "openai format", params: map[string]any{"use_openai_format": true}},
		{name: "tokens-in format is accepted and ignored (D1)", params: map[string]any{"use_openai_format": false}},
		{name: "injected connectors", params: map[string]any{"kv_connector": "kv-nixl", "ec_connector": "ec-nixl"}},
		{name: "use_openai_format as a string", params: map[string]any{"use_openai_format": "true"}, wantErr: "use_openai_format: expected bool, got string"},
		{name: "unknown key", params: map[string]any{"address": "http://x"}, wantErr: `unknown key "address"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := builtin.NewConditionalDecodePlugin(phaseClient(t, "http://127.0.0.1:1")).New(tt.params)
			if tt.wantErr == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.wantErr)
		})
	}
	t.Run("gateway required", func(t *testing.T) {
		t.Parallel()
		_, err := builtin.NewConditionalDecodePlugin(nil).New(nil)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "gateway client is required")
	})
}

func TestConditionalDecodeCacheHit(t *testing.T) {
	t.Parallel()
	const answer = `{"choices":[{"message":{"role":"assistant","content":"Hello!"}}]}`
	gw := workerAnswer(t, http.StatusOK, answer)
	sink := &steptest.Sink{}
	rc := &steps.RequestContext{
		RequestID: "req-1", Format: legs.FormatChat, Sink: sink,
		Body:   []byte(`{"model":"test","stream":false,"messages":[{"role":"user","content":"hi"}]}`),
		Tokens: requestbody.NewTokens([]uint32{1, 2, 3}),
		Header: headers.NewForwarded("authorization", "Bearer t"),
	}
	err := newConditionalDecode(t, gw.URL, nil).Execute(context.Background(), rc)
	require.ErrorIs(t, err, steps.ErrDone, "a hit answers the client and ends the pipeline")

	sentLegs := gw.Legs()
	require.Len(t, sentLegs, 1)
	leg := sentLegs[0]
	assert.Equal(t, http.MethodPost, leg.Method)
	assert.Equal(t, "/v1/chat/completions", leg.Path)
	assert.Equal(t, "decode", leg.Header.Get("EPP-Profile"))
	assert.Equal(t, "if-available", leg.Header.Get("Prefer"))
	assert.Equal(t, "req-1", leg.Header.Get("X-Request-Id"))
	assert.Equal(t, "application/json", leg.Header.Get("Content-Type"))
	assert.Equal(t, "Bearer t", leg.Header.Get("Authorization"))
	var sent struct {
		Model  string `json:"model"`
		Tokens struct {
			TokenIDs []uint32 `json:"token_ids"`
		} `json:"tokens"`
	}
	require.NoError(t, json.Unmarshal(leg.Body, &sent))
	assert.Equal(t, "test", sent.Model)
	assert.Len(t, sent.Tokens.TokenIDs, 3)

	assert.Equal(t, http.StatusOK, sink.Status)
	assert.Equal(t, "application/json", sink.ContentType)
	assert.JSONEq(t, answer, string(sink.Body))
}

func TestConditionalDecodeCacheHitStreams(t *testing.T) {
	t.Parallel()
	gw := steptest.NewGateway(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, e := range []string{`{"choices":[{"delta":{"content":"Hel"}}]}`, `{"choices":[{"delta":{"content":"lo!"}}]}`, "[DONE]"} {
			_, _ = w.Write([]byte("data: " + e + "\n\n"))
			w.(http.Flusher).Flush()
		}
	})
	sink := &steptest.Sink{}
	rc := &steps.RequestContext{RequestID: "r", Format: legs.FormatChat, Stream: true, Sink: sink,
		Body: []byte(`{"model":"test","stream":true,"messages":[]}`), Tokens: requestbody.NewTokens([]uint32{1, 2, 3})}
	require.ErrorIs(t, newConditionalDecode(t, gw.URL, nil).Execute(context.Background(), rc), steps.ErrDone)
	assert.Equal(t, []string{`{"choices":[{"delta":{"content":"Hel"}}]}`, `{"choices":[{"delta":{"content":"lo!"}}]}`, "[DONE]"},
		sink.EventStrings())
	assert.Zero(t, sink.Status, "a stream is delivered as events")
	assert.Contains(t, string(gw.Legs()[0].Body), `"stream":true`, "the client's stream flag is kept")
}

func TestConditionalDecodeCacheMiss(t *testing.T) {
	t.Parallel()
	gw := workerAnswer(t, http.StatusPreconditionFailed, `{"error":"no cached prefix","hint":"x"}`)
	sink := &steptest.Sink{}
	rc := &steps.RequestContext{RequestID: "r", Format: legs.FormatCompletions, Sink: sink,
		Body: []byte(`{"model":"test","prompt":"Hello"}`), Tokens: requestbody.NewTokens([]uint32{1, 2})}
	err := newConditionalDecode(t, gw.URL, nil).Execute(context.Background(), rc)
	require.NoError(t, err, "a miss lets the pipeline go on")
	assert.Len(t, gw.Legs(), 1)
	assert.Zero(t, sink.Status, "nothing is written on a miss")
	assert.Nil(t, sink.Body)
	assert.Empty(t, sink.Received)
	assert.Equal(t, `{"model":"test","prompt":"Hello"}`, string(rc.Body), "the request context keeps the client's body")
}

// TestConditionalDecodeRelaysOtherStatuses: any other non-2xx reaches the
// client with the worker's status and body, like decode.
func TestConditionalDecodeRelaysOtherStatuses(t *testing.T) {
	t.Parallel()
	for _, status := range []int{http.StatusBadRequest, http.StatusNotFound, http.StatusTooManyRequests,
		http.StatusInternalServerError, http.StatusBadGateway, http.StatusServiceUnavailable} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			t.Parallel()
			const body = `{"error":{"message":"worker says no"}}`
			gw := workerAnswer(t, status, body)
			sink := &steptest.Sink{}
			rc := &steps.RequestContext{RequestID: "r", Format: legs.FormatChat, Sink: sink, Body: []byte(`{"model":"test"}`)}
			err := newConditionalDecode(t, gw.URL, nil).Execute(context.Background(), rc)
			var se *gateway.StatusError
			require.ErrorAs(t, err, &se)
			assert.Equal(t, status, se.StatusCode)
			assert.True(t, se.Relay)
			assert.Equal(t, "conditional-decode", se.Leg)
			assert.Equal(t, "application/json", se.ContentType)
			assert.JSONEq(t, body, string(se.Body))
			assert.NotErrorIs(t, err, steps.ErrDone)
			assert.Zero(t, sink.Status, "the service writes the relayed error")
		})
	}
}

func TestConditionalDecodeTransportError(t *testing.T) {
	t.Parallel()
	gw := workerAnswer(t, http.StatusOK, `{}`)
	gw.Close()
	sink := &steptest.Sink{}
	rc := &steps.RequestContext{RequestID: "r", Format: legs.FormatChat, Sink: sink, Body: []byte(`{"model":"test"}`)}
	err := newConditionalDecode(t, gw.URL, nil).Execute(context.Background(), rc)
	var te *gateway.TransportError
	require.ErrorAs(t, err, &te)
	assert.Equal(t, "conditional-decode", te.Leg)
	assert.NotErrorIs(t, err, steps.ErrDone)
	assert.Zero(t, sink.Status)
}

func TestConditionalDecodeRejectsABrokenBody(t *testing.T) {
	t.Parallel()
	gw := workerAnswer(t, http.StatusOK, `{}`)
	rc := &steps.RequestContext{RequestID: "r", Format: legs.FormatChat, Sink: &steptest.Sink{}, Body: []byte(`{"model":`), Tokens: requestbody.NewTokens([]uint32{1})}
	err := newConditionalDecode(t, gw.URL, nil).Execute(context.Background(), rc)
	assert.ErrorIs(t, err, legs.ErrInvalidRequest)
	assert.Empty(t, gw.Legs())
}

// TestConditionalDecodeBodies goldens every body the step sends: the
// client's body plus the tokens render produced, shaped for the client's
// API, without kv_transfer_params, output caps or image uuids.
func TestConditionalDecodeBodies(t *testing.T) {
	t.Parallel()
	chatWithImages := `{"model":"llava","stream":false,"max_tokens":50,"messages":[{"role":"user","content":[` +
		`{"type":"text","text":"Describe"},{"type":"image_url","image_url":{"url":"data:image/jpeg;base64,/9j/AA"}}]}]}`
	images := []features.MultimodalEntry{{Index: 0, Hash: "abc123hash", ContentType: "image/jpeg", Base64Data: "/9j/AA",
		KwargsData: json.RawMessage(`"dGVuc29y"`), Placeholder: features.Placeholder{Offset: 1, Length: 3}}}
	prefilled := json.RawMessage(`{"do_remote_decode":true,"remote_engine_id":"e1"}`)
	tests := []struct {
		name      string
		format    legs.Format
		body      string
		rc        steps.RequestContext
		params    map[string]any
		unchanged bool // the client's bytes go out as they are
	}{
		{name: "chat_tokens_images", format: legs.FormatChat, body: chatWithImages,
			rc: steps.RequestContext{Tokens: requestbody.NewTokens([]uint32{1, 32000, 32000, 32000, 2345, 6789}), Multimodal: images}},
		{name: "chat_tokens", format: legs.FormatChat, body: `{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true,"stream_options":{"include_usage":true}}`,
			rc: steps.RequestContext{Tokens: requestbody.NewTokens([]uint32{1, 2, 4294967295})}},
		{name: "chat_tokens_openai_format_off", format: legs.FormatChat, body: `{"model":"m","messages":[]}`,
			rc: steps.RequestContext{Tokens: requestbody.NewTokens([]uint32{5})}, params: map[string]any{"use_openai_format": false}},
		{name: "chat_no_tokens", format: legs.FormatChat, body: chatWithImages,
			rc: steps.RequestContext{Multimodal: images}, unchanged: true},
		{name: "completions_tokens", format: legs.FormatCompletions, body: `{"model":"m","prompt":"Hello","max_tokens":7,"min_tokens":3}`,
			rc: steps.RequestContext{Tokens: requestbody.NewTokens([]uint32{9, 8, 7}), PD: pd.State{Done: true, KVParams: prefilled}}},
		{name: "completions_no_tokens", format: legs.FormatCompletions, body: `{"model":"m","prompt":"Hello"}`, unchanged: true},
		{name: "generate_tokens", format: legs.FormatGenerate, body: `{"model":"m","token_ids":[1,2,3],"sampling_params":{"max_tokens":50}}`,
			rc: steps.RequestContext{Tokens: requestbody.NewTokens([]uint32{1, 2, 3}), Multimodal: images}, unchanged: true},
		{name: "generate_no_tokens", format: legs.FormatGenerate, body: `{"model":"m","token_ids":[1]}`, unchanged: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			gw := workerAnswer(t, http.StatusOK, `{}`)
			rc := tt.rc
			rc.RequestID, rc.Format, rc.Body, rc.Sink = "r", tt.format, []byte(tt.body), &steptest.Sink{}
			require.ErrorIs(t, newConditionalDecode(t, gw.URL, tt.params).Execute(context.Background(), &rc), steps.ErrDone)
			sentLegs := gw.Legs()
			require.Len(t, sentLegs, 1)
			assert.Equal(t, tt.format.Path(), sentLegs[0].Path)
			sent := sentLegs[0].Body
			goldenJSON(t, "conditional_decode/"+tt.name, sent)
			goldenWire(t, "conditional_decode/"+tt.name, sent)
			if tt.unchanged {
				assert.Equal(t, tt.body, string(sent))
			}
			for _, key := range []string{"kv_transfer_params", "ec_transfer_params", "kwargs_data", "uuid"} {
				assert.NotContains(t, string(sent), key)
			}
			assert.Equal(t, tt.body, string(rc.Body), "the request context keeps the client's body")
		})
	}
}

// TestConditionalDecodeRelayFailure: a stream that breaks after the first
// event ends the request with an error, not ErrDone.
func TestConditionalDecodeRelayFailure(t *testing.T) {
	t.Parallel()
	gw := steptest.NewGateway(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte("data: {\"n\":1}\n\ndata: {\"n\":2}\n\n"))
	})
	gone := errors.New("client gone")
	sink := &steptest.Sink{FailAfter: 1, Err: gone}
	rc := &steps.RequestContext{RequestID: "r", Format: legs.FormatChat, Sink: sink, Body: []byte(`{"stream":true}`)}
	err := newConditionalDecode(t, gw.URL, nil).Execute(context.Background(), rc)
	require.ErrorIs(t, err, gone)
	assert.NotErrorIs(t, err, steps.ErrDone)
	assert.Contains(t, err.Error(), "conditional-decode")
}
