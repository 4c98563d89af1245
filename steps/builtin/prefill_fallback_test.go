package builtin_test

import (
	"context"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/internal/gateway"
	"github.com/coordinator-project/coordinator/internal/wire/pd"
	"github.com/coordinator-project/coordinator/steps"
	"github.com/coordinator-project/coordinator/steps/builtin"
	"github.com/coordinator-project/coordinator/steps/steptest"
)

// fallbackPipeline is prefill → decode (kv-nixl) against url, with the
// prefill step's params.
func fallbackPipeline(t *testing.T, client *gateway.Client, prefillParams map[string]any) *steps.Pipeline {
	t.Helper()
	kvs := phaseKVSet(t)
	plugins := []steps.Plugin{builtin.NewPrefillPlugin(client, kvs, phaseECSet(t)), builtin.NewDecodePlugin(client, kvs)}
	p, err := steps.NewPipeline(plugins, []steps.StepConfig{{Type: builtin.PrefillType, Params: prefillParams}, {Type: builtin.DecodeType}},
		steps.Defaults{KVConnector: "kv-nixl", ECConnector: "ec-nixl", UseOpenAIFormat: true})
	require.NoError(t, err)
	return p
}

// failingPrefill is a fake gateway whose prefill workers answer status and
// whose decode workers answer decodeAnswer.
func failingPrefill(t *testing.T, status int) *recorder {
	t.Helper()
	return newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.Header.Get("EPP-Profile") == gateway.ProfilePrefill {
			w.WriteHeader(status)
			_, _ = w.Write([]byte(`{"error":{"message":"prefill pool unwell"}}`))
			return
		}
		_, _ = w.Write([]byte(decodeAnswer))
	})
}

var fallbackOn = map[string]any{"fallback_to_decode": true}

func TestPrefillFallbackParam(t *testing.T) {
	t.Parallel()
	_, err := builtin.NewPrefillPlugin(phaseClient(t, "http://127.0.0.1:1"), phaseKVSet(t), phaseECSet(t)).
		New(map[string]any{"fallback_to_decode": "yes"})
	require.ErrorContains(t, err, "fallback_to_decode: expected bool, got string")
}

func TestPrefillFallbackServesWithDecodeAlone(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		rc   func() *steps.RequestContext
		kv   []string // where the decode body would carry kv_transfer_params
	}{
		{name: "chat", rc: mmChatContext, kv: []string{"kv_transfer_params"}},
		{name: "completions", rc: func() *steps.RequestContext { return completionsContext(`"Hello"`, []uint32{7, 8}) },
			kv: []string{"kv_transfer_params"}},
		{name: "generate", rc: mmGenerateContext, kv: []string{"sampling_params", "extra_args", "kv_transfer_params"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			gw := failingPrefill(t, http.StatusInternalServerError)
			rc := tt.rc()
			require.NoError(t, fallbackPipeline(t, phaseClient(t, gw.URL), fallbackOn).Run(context.Background(), rc))

			require.NotNil(t, rc.PD.Fallback)
			assert.Equal(t, pd.FallbackStatus5xx, rc.PD.Fallback.Reason)
			var se *gateway.StatusError
			require.ErrorAs(t, rc.PD.Fallback.Err, &se)
			assert.Equal(t, http.StatusInternalServerError, se.StatusCode)
			assert.False(t, rc.PD.Done)
			assert.Nil(t, rc.PD.KVParams)

			assert.Equal(t, []string{gateway.ProfilePrefill, gateway.ProfileDecode}, profiles(gw))
			decode := legsOf(gw, gateway.ProfileDecode)[0]
			assert.Nil(t, at(decoded(t, decode.Body), tt.kv...), "no kv_transfer_params: decode serves alone")
			assert.NotContains(t, string(decode.Body), "kv_transfer_params")
			assert.Equal(t, decodeAnswer, string(rc.Sink.(*steptest.Sink).Body))
		})
	}
}

func TestPrefillFallbackOnlyForUpstreamFaults(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		status int
		params map[string]any
		reason string // "" when the request must fail
	}{
		{name: "500 falls back", status: 500, params: fallbackOn, reason: pd.FallbackStatus5xx},
		{name: "503 falls back", status: 503, params: fallbackOn, reason: pd.FallbackStatus5xx},
		{name: "504 falls back", status: 504, params: fallbackOn, reason: pd.FallbackStatus5xx},
		{name: "400 is the client's fault", status: 400, params: fallbackOn},
		{name: "429 is returned too", status: 429, params: fallbackOn},
		{name: "off by default", status: 500},
		{name: "off when false", status: 500, params: map[string]any{"fallback_to_decode": false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			gw := failingPrefill(t, tt.status)
			rc := completionsContext(`"Hello"`, nil)
			err := fallbackPipeline(t, phaseClient(t, gw.URL), tt.params).Run(context.Background(), rc)
			if tt.reason != "" {
				require.NoError(t, err)
				require.NotNil(t, rc.PD.Fallback)
				assert.Equal(t, tt.reason, rc.PD.Fallback.Reason)
				return
			}
			var se *gateway.StatusError
			require.ErrorAs(t, err, &se)
			assert.Equal(t, tt.status, se.StatusCode)
			assert.Equal(t, "prefill", se.Leg)
			assert.Nil(t, rc.PD.Fallback)
			assert.Equal(t, []string{gateway.ProfilePrefill}, profiles(gw), "decode never sent")
		})
	}
}

func TestPrefillFallbackOnTransportErrorAndTimeout(t *testing.T) {
	t.Parallel()
	refused := refusedURL(t)
	hang := newRecorder(t, func(_ http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	cut := newRecorder(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Length", "100")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte(`{"kv_transfer_params":`))
		panic(http.ErrAbortHandler) // the answer is cut short
	})
	tests := []struct {
		name   string
		client *gateway.Client
		reason string
	}{
		{name: "connection refused", client: phaseClient(t, refused), reason: pd.FallbackTransport},
		{name: "answer cut short", client: phaseClient(t, cut.URL), reason: pd.FallbackTransport},
		{name: "no headers in time", reason: pd.FallbackTimeout, client: func() *gateway.Client {
			c, err := gateway.New(gateway.Options{Address: hang.URL, ResponseHeaderTimeout: 50 * time.Millisecond})
			require.NoError(t, err)
			t.Cleanup(c.Close)
			return c
		}()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			step, err := builtin.NewPrefillPlugin(tt.client, phaseKVSet(t), phaseECSet(t)).New(fallbackOn)
			require.NoError(t, err)
			rc := completionsContext(`"Hello"`, nil)
			require.NoError(t, step.Execute(context.Background(), rc))
			require.NotNil(t, rc.PD.Fallback)
			assert.Equal(t, tt.reason, rc.PD.Fallback.Reason, "%v", rc.PD.Fallback.Err)
			var te *gateway.TransportError
			assert.ErrorAs(t, rc.PD.Fallback.Err, &te)
			assert.False(t, rc.PD.Done)
		})
	}
}

func TestPrefillFallbackNeverForClientCancellationOrBadAnswer(t *testing.T) {
	t.Parallel()
	t.Run("client cancels", func(t *testing.T) {
		t.Parallel()
		arrived := make(chan struct{})
		gw := newRecorder(t, func(_ http.ResponseWriter, r *http.Request) {
			close(arrived)
			<-r.Context().Done()
		})
		step := newPrefill(t, gw.URL, fallbackOn)
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			<-arrived
			cancel()
		}()
		rc := completionsContext(`"Hello"`, nil)
		err := step.Execute(ctx, rc)
		require.ErrorIs(t, err, context.Canceled)
		assert.Nil(t, rc.PD.Fallback)
	})
	t.Run("malformed 200 answer", func(t *testing.T) {
		t.Parallel()
		gw := newRecorder(t, func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("data: {}\n\n")) })
		rc := completionsContext(`"Hello"`, nil)
		err := newPrefill(t, gw.URL, fallbackOn).Execute(context.Background(), rc)
		require.ErrorContains(t, err, "prefill: decode answer")
		assert.Nil(t, rc.PD.Fallback)
	})
}

// profiles lists the legs' EPP-Profile in arrival order.
func profiles(gw legSource) []string {
	var out []string
	for _, l := range gw.Legs() {
		out = append(out, l.Header.Get("EPP-Profile"))
	}
	return out
}

// refusedURL is an http URL on loopback where nothing listens.
func refusedURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	url := "http://" + l.Addr().String()
	require.NoError(t, l.Close())
	return url
}
