package builtin_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
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

func newDecode(t *testing.T, url string, params map[string]any) steps.Step {
	t.Helper()
	step, err := builtin.NewDecodePlugin(phaseClient(t, url), phaseKVSet(t)).New(params)
	require.NoError(t, err)
	return step
}

func TestDecodeRelaysJSONAndSendsTheBodyUnchanged(t *testing.T) {
	t.Parallel()
	gw := steptest.NewGateway(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"choices":[{"message":{"content":"Hello!"}}]}`))
	})
	body := `{"model":"m", "messages":[{"role":"user","content":"hi"}], "top_k": 5, "chat_template_kwargs":{"x":1}}`
	sink := &steptest.Sink{}
	rc := &steps.RequestContext{RequestID: "req-1", Format: legs.FormatChat, Body: []byte(body), Sink: sink,
		Header: headers.NewForwarded("authorization", "Bearer t")}
	err := newDecode(t, gw.URL, nil).Execute(context.Background(), rc)
	require.ErrorIs(t, err, steps.ErrDone)
	assert.True(t, rc.PD.DecodeSent, "the service reads it to log a request that ended between prefill and decode")

	sentLegs := gw.Legs()
	require.Len(t, sentLegs, 1)
	assert.Equal(t, "/v1/chat/completions", sentLegs[0].Path)
	assert.Equal(t, body, string(sentLegs[0].Body), "without prefill or tokens the client's bytes go out unchanged")
	assert.Equal(t, "decode", sentLegs[0].Header.Get("EPP-Profile"))
	assert.Equal(t, "req-1", sentLegs[0].Header.Get("X-Request-Id"))
	assert.Equal(t, "application/json", sentLegs[0].Header.Get("Content-Type"))
	assert.Equal(t, "Bearer t", sentLegs[0].Header.Get("Authorization"))
	assert.Empty(t, sentLegs[0].Header.Get("Prefer"))
	assert.Equal(t, http.StatusOK, sink.Status)
	assert.JSONEq(t, `{"choices":[{"message":{"content":"Hello!"}}]}`, string(sink.Body))
}

func TestDecodeStreamsEvents(t *testing.T) {
	t.Parallel()
	gw := steptest.NewGateway(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, e := range []string{`{"n":1}`, `{"n":2}`, "[DONE]"} {
			_, _ = w.Write([]byte("data: " + e + "\n\n"))
			w.(http.Flusher).Flush()
		}
	})
	sink := &steptest.Sink{}
	rc := &steps.RequestContext{RequestID: "r", Format: legs.FormatCompletions, Body: []byte(`{"prompt":"x","stream":true}`), Stream: true, Sink: sink}
	require.ErrorIs(t, newDecode(t, gw.URL, nil).Execute(context.Background(), rc), steps.ErrDone)
	assert.Equal(t, []string{`{"n":1}`, `{"n":2}`, "[DONE]"}, sink.EventStrings())
	assert.Equal(t, "/v1/completions", gw.Legs()[0].Path)
}

func TestDecodeWorkerErrorIsRelayed(t *testing.T) {
	t.Parallel()
	gw := steptest.NewGateway(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"error":{"message":"The model x does not exist."}}`))
	})
	rc := &steps.RequestContext{RequestID: "r", Format: legs.FormatChat, Body: []byte(`{"model":"x"}`), Sink: &steptest.Sink{}}
	err := newDecode(t, gw.URL, nil).Execute(context.Background(), rc)
	var se *gateway.StatusError
	require.ErrorAs(t, err, &se)
	assert.True(t, se.Relay)
	assert.Equal(t, http.StatusNotFound, se.StatusCode)
	assert.JSONEq(t, `{"error":{"message":"The model x does not exist."}}`, string(se.Body))
}

// The worker's answer header reaches the sink before the answer, as it
// came, streamed or not; a relayed error keeps it on the StatusError.
func TestDecodeDeliversTheWorkersHeader(t *testing.T) {
	t.Parallel()
	gw := steptest.NewGateway(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Worker", "w-7")
		if r.Header.Get("X-Fail") != "" {
			w.Header().Set("Retry-After", "3")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		if b, _ := io.ReadAll(r.Body); strings.Contains(string(b), `"stream":true`) {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = w.Write([]byte("data: [DONE]\n\n"))
			return
		}
		_, _ = w.Write([]byte(`{}`))
	})
	for _, stream := range []bool{false, true} {
		body := `{"model":"m"}`
		if stream {
			body = `{"model":"m","stream":true}`
		}
		sink := &steptest.Sink{}
		rc := &steps.RequestContext{RequestID: "r", Format: legs.FormatCompletions, Body: []byte(body), Stream: stream, Sink: sink}
		require.ErrorIs(t, newDecode(t, gw.URL, nil).Execute(context.Background(), rc), steps.ErrDone)
		require.Len(t, sink.Headers, 1, "stream %v", stream)
		assert.Equal(t, "w-7", sink.Headers[0].Get("X-Worker"))
	}
	rc := &steps.RequestContext{RequestID: "r", Format: legs.FormatChat, Body: []byte(`{"model":"m"}`), Sink: &steptest.Sink{},
		Header: headers.NewForwarded("x-fail", "1")}
	var se *gateway.StatusError
	require.ErrorAs(t, newDecode(t, gw.URL, nil).Execute(context.Background(), rc), &se)
	assert.Equal(t, "3", se.Header.Get("Retry-After"))
	assert.Equal(t, "w-7", se.Header.Get("X-Worker"))
}

func TestDecodeBodyShapes(t *testing.T) {
	t.Parallel()
	prefillKV := json.RawMessage(`{"do_remote_prefill":true,"do_remote_decode":false,"remote_engine_id":"e1","remote_block_ids":["1","2"],"tp_size":2}`)
	wantNIXL := `{"do_remote_prefill":true,"do_remote_decode":false,"remote_engine_id":"e1","remote_block_ids":["1","2"],"tp_size":2}`
	images := []features.MultimodalEntry{{Hash: "h0", Placeholder: features.Placeholder{Offset: 1, Length: 2}}, {Hash: ""}}
	tests := []struct {
		name   string
		format legs.Format
		body   string
		rc     steps.RequestContext
		params map[string]any
		want   string
	}{
		{
			name: "chat after prefill with tokens and images", format: legs.FormatChat,
			body: `{"model":"m","max_tokens":5,"min_tokens":3,"messages":[{"role":"user","content":[{"type":"text","text":"d"},` +
				`{"type":"image_url","image_url":{"url":"data:image/png;base64,AA"}},{"type":"image_url","image_url":{"url":"data:image/png;base64,BB"},"uuid":"client"}]}]}`,
			rc:     steps.RequestContext{Tokens: requestbody.NewTokens([]uint32{1, 7, 7, 9}), Multimodal: images, PD: pd.State{Done: true, KVParams: prefillKV}},
			params: map[string]any{"kv_connector": "kv-nixl"},
			want: `{"model":"m","max_tokens":5,"min_tokens":3,"messages":[{"role":"user","content":[{"type":"text","text":"d"},` +
				`{"type":"image_url","image_url":{"url":"data:image/png;base64,AA"},"uuid":"h0"},{"type":"image_url","image_url":{"url":"data:image/png;base64,BB"},"uuid":"client"}]}],` +
				`"kv_transfer_params":` + wantNIXL + `,"tokens":{"token_ids":[1,7,7,9],"features":{"mm_hashes":{"image":["h0",""]},"mm_placeholders":{"image":[{"offset":1,"length":2},{"offset":0,"length":0}]}}}}`,
		},
		{
			name: "completions after prefill replaces the prompt", format: legs.FormatCompletions,
			body:   `{"model":"m","prompt":"Hello","stream":false}`,
			rc:     steps.RequestContext{Tokens: requestbody.NewTokens([]uint32{9, 4294967295}), PD: pd.State{Done: true}},
			params: map[string]any{"kv_connector": "kv-shared-storage"},
			want:   `{"model":"m","prompt":[9,4294967295],"stream":false,"kv_transfer_params":{"do_remote_decode":false,"do_remote_prefill":true}}`,
		},
		{
			name: "completions without token ids keeps the prompt", format: legs.FormatCompletions,
			body:   `{"model":"m","prompt":"Hello"}`,
			rc:     steps.RequestContext{PD: pd.State{Done: true}},
			params: map[string]any{"kv_connector": "kv-shared-storage"},
			want:   `{"model":"m","prompt":"Hello","kv_transfer_params":{"do_remote_decode":false,"do_remote_prefill":true}}`,
		},
		{
			name: "generate nests kv params and keeps sampling params", format: legs.FormatGenerate,
			body:   `{"model":"m","token_ids":[1,2],"sampling_params":{"max_tokens":50,"extra_args":{"keep":1}}}`,
			rc:     steps.RequestContext{Tokens: requestbody.NewTokens([]uint32{1, 2}), PD: pd.State{Done: true, KVParams: prefillKV}},
			params: map[string]any{"kv_connector": "kv-nixl"},
			want:   `{"model":"m","token_ids":[1,2],"sampling_params":{"max_tokens":50,"extra_args":{"keep":1,"kv_transfer_params":` + wantNIXL + `}}}`,
		},
		{
			name: "generate creates sampling params when missing", format: legs.FormatGenerate,
			body:   `{"model":"m","token_ids":[1]}`,
			rc:     steps.RequestContext{PD: pd.State{Done: true}},
			params: map[string]any{"kv_connector": "kv-shared-storage"},
			want:   `{"model":"m","token_ids":[1],"sampling_params":{"extra_args":{"kv_transfer_params":{"do_remote_decode":false,"do_remote_prefill":true}}}}`,
		},
		{
			name: "no prefill means no kv params (D2)", format: legs.FormatChat,
			body: `{"model":"m","messages":[]}`, rc: steps.RequestContext{Tokens: requestbody.NewTokens([]uint32{5})},
			want: `{"model":"m","messages":[],"tokens":{"token_ids":[5]}}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			gw := steptest.NewGateway(t, func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(`{}`))
			})
			rc := tt.rc
			rc.RequestID, rc.Format, rc.Body, rc.Sink = "r", tt.format, []byte(tt.body), &steptest.Sink{}
			require.ErrorIs(t, newDecode(t, gw.URL, tt.params).Execute(context.Background(), &rc), steps.ErrDone)
			sentLegs := gw.Legs()
			require.Len(t, sentLegs, 1)
			assert.JSONEq(t, tt.want, string(sentLegs[0].Body))
			assert.Equal(t, tt.format.Path(), sentLegs[0].Path)
			assert.NotContains(t, string(sentLegs[0].Body), "ec_transfer_params")
		})
	}
}

func TestDecodeGenerateRejectsNonObjectSamplingParams(t *testing.T) {
	t.Parallel()
	gw := steptest.NewGateway(t, func(http.ResponseWriter, *http.Request) {})
	rc := &steps.RequestContext{RequestID: "r", Format: legs.FormatGenerate,
		Body: []byte(`{"token_ids":[1],"sampling_params":[1]}`), Sink: &steptest.Sink{}, PD: pd.State{Done: true}}
	err := newDecode(t, gw.URL, nil).Execute(context.Background(), rc)
	assert.ErrorIs(t, err, legs.ErrInvalidRequest)
	assert.Empty(t, gw.Legs(), "nothing is sent for a bad body")
	assert.False(t, rc.PD.DecodeSent)
}

func TestDecodeRejectsUnknownConnector(t *testing.T) {
	t.Parallel()
	_, err := builtin.NewDecodePlugin(phaseClient(t, "http://127.0.0.1:1"), phaseKVSet(t)).New(map[string]any{"kv_connector": "kv-bogus"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `unknown kv_connector: "kv-bogus"`)
}
