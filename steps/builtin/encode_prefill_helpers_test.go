package builtin_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/connectors/ec"
	"github.com/coordinator-project/coordinator/connectors/kv"
	"github.com/coordinator-project/coordinator/internal/gateway"
	"github.com/coordinator-project/coordinator/internal/headers"
	"github.com/coordinator-project/coordinator/internal/requestbody"
	"github.com/coordinator-project/coordinator/internal/wire/features"
	"github.com/coordinator-project/coordinator/internal/wire/legs"
	"github.com/coordinator-project/coordinator/steps"
	"github.com/coordinator-project/coordinator/steps/builtin"
	"github.com/coordinator-project/coordinator/steps/steptest"
)

// Helpers of the encode and prefill tests.

// phaseClient is a gateway client for the fake at url.
func phaseClient(t *testing.T, url string) *gateway.Client {
	t.Helper()
	c, err := gateway.New(gateway.Options{Address: url, MaxIdleConnsPerHost: 16, IdleConnTimeout: time.Minute, ResponseHeaderTimeout: 30 * time.Second})
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

// sglangPort is the kv-sglang bootstrap port of the tests.
const sglangPort = 8998

// phaseKVSet holds every KV connector.
func phaseKVSet(t *testing.T) *kv.Set {
	t.Helper()
	s, err := kv.NewSet([]kv.Connector{kv.NewNIXL(), kv.NewSGLang(sglangPort), kv.NewSharedStorage()})
	require.NoError(t, err)
	return s
}

// phaseECSet holds every EC connector.
func phaseECSet(t testing.TB) *ec.Set {
	t.Helper()
	s, err := ec.NewSet([]ec.Connector{ec.NewNIXL(), ec.NewSharedStorage()})
	require.NoError(t, err)
	return s
}

func newEncode(t *testing.T, url string, params map[string]any) steps.Step {
	t.Helper()
	step, err := builtin.NewEncodePlugin(phaseClient(t, url), phaseECSet(t)).New(params)
	require.NoError(t, err)
	return step
}

func newPrefill(t *testing.T, url string, params map[string]any) steps.Step {
	t.Helper()
	step, err := builtin.NewPrefillPlugin(phaseClient(t, url), phaseKVSet(t), phaseECSet(t)).New(params)
	require.NoError(t, err)
	return step
}

// The multimodal chat request of the tests: text, then two images.
const (
	mmChatBody = `{"model":"llava","stream":true,"stream_options":{"include_usage":true},"max_tokens":100,"min_tokens":2,` +
		`"max_completion_tokens":100,"top_k":5,"messages":[{"role":"user","content":[{"type":"text","text":"Describe these images"},` +
		`{"type":"image_url","image_url":{"url":"data:image/jpeg;base64,/9j/4AAQ","detail":"high"}},` +
		`{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0K"}}]}]}`
	hash0 = "abc123hash"
	hash1 = "def456hash"
)

// mmTokenIDs is the rendered mmChatBody: BOS, 3 + 3 placeholder tokens, text.
var mmTokenIDs = []uint32{1, 32000, 32000, 32000, 32000, 32000, 32000, 2345, 6789}

// mmEntries are mmChatBody's images as render leaves them; the second one
// is an encoder-cache hit (no tensor).
func mmEntries() []features.MultimodalEntry {
	return []features.MultimodalEntry{
		{Index: 0, Hash: hash0, KwargsData: json.RawMessage(`"dGVuc29yLTE="`), Placeholder: features.Placeholder{Offset: 1, Length: 3}},
		{Index: 1, Hash: hash1, Placeholder: features.Placeholder{Offset: 4, Length: 3}},
	}
}

// mmChatContext is a rendered multimodal chat request.
func mmChatContext() *steps.RequestContext {
	return &steps.RequestContext{
		RequestID:  "req-abc-123",
		Format:     legs.FormatChat,
		Header:     headers.NewForwarded("authorization", "Bearer t", "traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"),
		Body:       []byte(mmChatBody),
		Model:      "llava",
		Stream:     true,
		Tokens:     requestbody.NewTokens(append([]uint32(nil), mmTokenIDs...)),
		Multimodal: mmEntries(),
		Sink:       &steptest.Sink{},
	}
}

// descriptor is the ec_transfer_params descriptor the fake encoder answers
// for hash.
func descriptor(hash string) string {
	return fmt.Sprintf(`{"peer_host":"10.0.0.1","peer_port":5501,"size_bytes":2359296,"nixl_agent_metadata_b64":"TklYTA-%s"}`, hash)
}

// encodeAnswer is an encoder's answer carrying hash's descriptor.
func encodeAnswer(hash string) string {
	return fmt.Sprintf(`{"id":"chatcmpl-abc","choices":[],"ec_transfer_params":{%q:%s}}`, hash, descriptor(hash))
}

// prefillKV is the fake prefill worker's kv_transfer_params: block ids as
// strings, as simulators send them (D15: never re-typed).
const prefillKV = `{"do_remote_prefill":true,"do_remote_decode":false,"remote_block_ids":["1","2","4"],` +
	`"remote_engine_id":"e1101616","remote_request_id":"generate-tokens-abc123","remote_host":"10.0.0.42",` +
	`"remote_port":5600,"tp_size":1,"remote_num_tokens":318}`

// sglangKV is the fake prefill worker's kv_transfer_params for a
// kv-sglang leg: bootstrap fields with the worker's host.
const sglangKV = `{"do_remote_prefill":true,"do_remote_decode":false,"bootstrap_host":"10.0.0.42",` +
	`"bootstrap_port":8998,"bootstrap_room":"5b0c3f5e-2f1d-4c7e-9a51-0f3c2d1e4b6a"}`

// prefillKVFor is the fake prefill worker's kv_transfer_params for a leg
// body: sglangKV for a kv-sglang leg, else prefillKV.
func prefillKVFor(body []byte) string {
	if bytes.Contains(body, []byte(`"bootstrap_room"`)) {
		return sglangKV
	}
	return prefillKV
}

const decodeAnswer = `{"choices":[{"message":{"role":"assistant","content":"Hello!"}}]}`

// recorder is a fake gateway on 127.0.0.1 like steptest.Gateway, except
// that its handler can read the request body again (steptest.Gateway has
// drained it by then, and the encode fakes answer by the leg's image hash).
type recorder struct {
	*httptest.Server
	mu       sync.Mutex
	sentLegs []steptest.Leg
}

// newRecorder starts a recorder answering with handle; it is closed when
// the test ends. Handlers must not call t.Fatal.
func newRecorder(t testing.TB, handle http.HandlerFunc) *recorder {
	rec := &recorder{}
	rec.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rec.mu.Lock()
		rec.sentLegs = append(rec.sentLegs, steptest.Leg{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body})
		rec.mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(body))
		handle(w, r)
	}))
	t.Cleanup(rec.Close)
	return rec
}

// Legs returns what was received so far, in arrival order.
func (rec *recorder) Legs() []steptest.Leg {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return append([]steptest.Leg(nil), rec.sentLegs...)
}

// legSource is a fake gateway that records legs.
type legSource interface {
	Legs() []steptest.Leg
}

// workers is a fake gateway that answers by EPP-Profile as the reference's
// tests do: encode echoes the leg's image hash as its ec_transfer_params
// key, prefill answers prefillKV, decode answers decodeAnswer.
func workers(t *testing.T) *recorder {
	t.Helper()
	return newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.Header.Get("EPP-Profile") {
		case gateway.ProfileEncode:
			_, _ = w.Write([]byte(encodeAnswer(legHash(bodyOf(r)))))
		case gateway.ProfilePrefill:
			_, _ = w.Write([]byte(`{"request_id":"generate-tokens-abc123","choices":[{"index":0,"finish_reason":"length","token_ids":[28715]}],` +
				`"kv_transfer_params":` + prefillKVFor(bodyOf(r)) + `,"ec_transfer_params":null}`))
		default:
			_, _ = w.Write([]byte(decodeAnswer))
		}
	})
}

// bodyOf reads a request body in a recorder's handler.
func bodyOf(r *http.Request) []byte {
	body, _ := io.ReadAll(r.Body)
	return body
}

// legHash is the image hash of an encode leg body ("" when none).
func legHash(body []byte) string {
	var leg struct {
		Features *struct {
			MMHashes struct {
				Image []string `json:"image"`
			} `json:"mm_hashes"`
		} `json:"features"`
		Tokens *struct {
			Features *struct {
				MMHashes struct {
					Image []string `json:"image"`
				} `json:"mm_hashes"`
			} `json:"features"`
		} `json:"tokens"`
	}
	if json.Unmarshal(body, &leg) != nil {
		return ""
	}
	var hashes []string
	switch {
	case leg.Features != nil:
		hashes = leg.Features.MMHashes.Image
	case leg.Tokens != nil && leg.Tokens.Features != nil:
		hashes = leg.Tokens.Features.MMHashes.Image
	}
	if len(hashes) != 1 {
		return ""
	}
	return hashes[0]
}

// legsOf returns the legs a fake received with the EPP-Profile profile.
func legsOf(gw legSource, profile string) []steptest.Leg {
	var out []steptest.Leg
	for _, l := range gw.Legs() {
		if l.Header.Get("EPP-Profile") == profile {
			out = append(out, l)
		}
	}
	return out
}

// legByHash returns the encode leg for the image hash.
func legByHash(t *testing.T, sentLegs []steptest.Leg, hash string) steptest.Leg {
	t.Helper()
	for _, l := range sentLegs {
		if legHash(l.Body) == hash {
			return l
		}
	}
	require.Failf(t, "no encode leg", "for hash %q", hash)
	return steptest.Leg{}
}

// decoded parses a JSON body for field assertions.
func decoded(t *testing.T, body []byte) map[string]any {
	t.Helper()
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	require.NoError(t, dec.Decode(&m), "body: %s", body)
	return m
}

// at walks nested objects of a decoded body; nil when a key is missing.
func at(m map[string]any, keys ...string) any {
	var cur any = m
	for _, k := range keys {
		obj, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		if cur, ok = obj[k]; !ok {
			return nil
		}
	}
	return cur
}

// hasKey reports whether the nested object at keys[:len-1] has keys[len-1].
func hasKey(m map[string]any, keys ...string) bool {
	parent, ok := at(m, keys[:len(keys)-1]...).(map[string]any)
	if !ok {
		return false
	}
	_, ok = parent[keys[len(keys)-1]]
	return ok
}

// withoutSGLangRoom checks that a body's kv_transfer_params (top level or
// under sampling_params.extra_args) has a fresh UUID bootstrap_room and
// returns the body without it, for golden files.
func withoutSGLangRoom(t *testing.T, body []byte) []byte {
	t.Helper()
	m := decoded(t, body)
	params, ok := m["kv_transfer_params"].(map[string]any)
	if !ok {
		params, ok = at(m, "sampling_params", "extra_args", "kv_transfer_params").(map[string]any)
	}
	require.True(t, ok, "no kv_transfer_params in %s", body)
	room, ok := params["bootstrap_room"].(string)
	require.True(t, ok, "bootstrap_room must be a string: %s", body)
	_, err := uuid.Parse(room)
	assert.NoError(t, err, "bootstrap_room must be a UUID")
	delete(params, "bootstrap_room")
	out, err := json.Marshal(m)
	require.NoError(t, err)
	return out
}

// pinnedSGLangRoom replaces kv-sglang's random bootstrap_room in a leg
// body with a fixed UUID, leaving every other byte as it was.
func pinnedSGLangRoom(t *testing.T, body []byte) []byte {
	t.Helper()
	room := sglangRoom.Find(body)
	require.NotNil(t, room, "no bootstrap_room in %s", body)
	return bytes.Replace(body, room, []byte(`"bootstrap_room":"00000000-0000-4000-8000-000000000000"`), 1)
}

// sglangRoom finds kv-sglang's bootstrap_room member.
var sglangRoom = regexp.MustCompile(`"bootstrap_room":"[0-9a-f-]{36}"`)

// assertLegHeaders checks what every gateway leg carries.
func assertLegHeaders(t *testing.T, leg steptest.Leg, profile, requestID string) {
	t.Helper()
	assert.Equal(t, http.MethodPost, leg.Method)
	assert.Equal(t, profile, leg.Header.Get("EPP-Profile"))
	assert.Equal(t, requestID, leg.Header.Get("X-Request-Id"))
	assert.Equal(t, []string{requestID}, leg.Header.Values("X-Request-Id"))
	assert.Equal(t, "application/json", leg.Header.Get("Content-Type"))
	assert.Equal(t, "Bearer t", leg.Header.Get("Authorization"))
	assert.NotEmpty(t, leg.Header.Get("Traceparent"))
}

// within fails the test when ch yields nothing within a generous deadline
// (a hang guard, not a timing assertion).
func within[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(20 * time.Second):
		require.FailNow(t, "timed out waiting for "+what)
		var zero T
		return zero
	}
}

// cancellable is a context cancelled when the test ends. Made after the fake
// gateway, its cleanup runs first, so a failing test never leaves a fake's
// handler blocked in the gateway's Close.
func cancellable(t *testing.T) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return ctx, cancel
}
