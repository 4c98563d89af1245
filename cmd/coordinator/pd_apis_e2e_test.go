package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The differential test of P/D for the Messages and Responses APIs, as
// TestPDAnswersReadLikeAggregatedOnes for chat: the same requests through a
// decode-only pipeline and through render/prefill/decode with kv-nixl, each
// against its own simulator, give the same answers (whole, and event by
// event with their types) but ids, timestamps and kv_transfer_params. After
// P/D a Messages answer's cache_read_input_tokens is the prefill worker's
// prefix-cache count (D21): 0 cold, a hit on the repeated prompt, never
// the decode worker's remote-KV count. A Responses request runs no prefill
// leg (vLLM's ResponsesRequest takes no kv_transfer_params).

// apiPDCase is one request of the test.
type apiPDCase struct {
	name, path, body string
	stream, prefill  bool
}

func apiPDCases() []apiPDCase {
	messages := func(tag, extra string) string {
		return `{"model":"sim-model","max_tokens":4,"messages":[{"role":"user","content":"` + pdPrompt(tag) + `"}]` + extra + `}`
	}
	responses := func(tag, extra string) string {
		return `{"model":"sim-model","max_output_tokens":4,"input":"` + pdPrompt(tag) + `"` + extra + `}`
	}
	return []apiPDCase{
		{name: "messages", path: "/v1/messages", body: messages("msg", ""), prefill: true},
		{name: "messages stream", path: "/v1/messages", body: messages("msg-stream", `,"stream":true`), stream: true, prefill: true},
		{name: "responses", path: "/v1/responses", body: responses("resp", "")},
		{name: "responses stream", path: "/v1/responses", body: responses("resp-stream", `,"stream":true`), stream: true},
	}
}

// apiPDAnswer is a normalized answer: the status, the JSON body, or each
// event of a stream as "<type> <normalized data>".
type apiPDAnswer struct {
	Status int
	Body   any
	Events []string
}

func (p pdSide) api(t *testing.T, c apiPDCase, id string) apiPDAnswer {
	t.Helper()
	resp := p.st.post(t, c.path, c.body, http.Header{"X-Request-Id": {id}})
	raw := readAll(t, resp.Body)
	a := apiPDAnswer{Status: resp.StatusCode}
	if resp.StatusCode != http.StatusOK || !c.stream {
		a.Body = apiNormalize(t, raw)
		return a
	}
	names, data := splitEvents(t, raw)
	for i, d := range data {
		b, err := json.Marshal(apiNormalize(t, d))
		require.NoError(t, err)
		a.Events = append(a.Events, names[i]+" "+string(b))
	}
	return a
}

// apiNormalize decodes an answer or event (numbers kept as written)
// without, at any depth, the members that differ by construction.
func apiNormalize(t *testing.T, body string) any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(body))
	dec.UseNumber()
	var v any
	require.NoError(t, dec.Decode(&v), body)
	var strip func(v any)
	strip = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for _, k := range []string{"id", "item_id", "created_at", "kv_transfer_params"} {
				delete(v, k)
			}
			for _, e := range v {
				strip(e)
			}
		case []any:
			for _, e := range v {
				strip(e)
			}
		}
	}
	strip(v)
	return v
}

// apiCached is a Messages usage's cache_read_input_tokens in a normalized
// answer or stream ("" when absent).
func apiCached(a apiPDAnswer) string {
	usage := func(v any) string {
		m, _ := v.(map[string]any)
		if msg, ok := m["message"].(map[string]any); ok {
			m = msg
		}
		u, _ := m["usage"].(map[string]any)
		n, _ := u["cache_read_input_tokens"].(json.Number)
		return string(n)
	}
	if a.Body != nil {
		return usage(a.Body)
	}
	for _, ev := range a.Events {
		name, data, _ := strings.Cut(ev, " ")
		if name != "message_start" {
			continue
		}
		var v any
		dec := json.NewDecoder(strings.NewReader(data))
		dec.UseNumber()
		if dec.Decode(&v) == nil {
			return usage(v)
		}
	}
	return ""
}

func TestPDAPIAnswersReadLikeAggregatedOnes(t *testing.T) {
	t.Parallel()
	eachPDPair(t, func(t *testing.T, agg, pd pdSide) {
		for i, c := range apiPDCases() {
			for round, temp := range []string{"cold", "repeated"} {
				id := fmt.Sprintf("api-pd-%d-%d", i, round)
				want := agg.api(t, c, id)
				got := pd.api(t, c, id)
				require.Equal(t, http.StatusOK, want.Status, "%s %s: aggregated %v", c.name, temp, want.Body)
				assert.Equal(t, want, got, "%s, %s prompt", c.name, temp)
				prefills := len(pdLegs(pd.sim, id, "prefill"))
				if !c.prefill {
					assert.Zero(t, prefills, "%s: no prefill leg", c.name)
					continue
				}
				assert.Equal(t, 1, prefills, "%s: a prefill leg ran", c.name)
				cached := apiCached(got)
				if round == 0 {
					assert.Equal(t, "0", cached, "%s: a cold prompt has nothing cached, whatever decode received", c.name)
				} else {
					assert.NotContains(t, []string{"", "0"}, cached, "%s: the repeated prompt hits the prefill's cache", c.name)
				}
			}
		}
	})
}
