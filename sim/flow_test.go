package sim

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFullPipelineFlow drives the legs the coordinator sends for one chat
// request with an image (compat §7.2-7.6), in strict mode, feeding each
// answer into the next leg.
func TestFullPipelineFlow(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, Options{Strict: true, OutputTokens: 4})
	const id = "flow-abc-123"
	const url = "data:image/png;base64,iVBORw0KGgo="
	messages := `[{"role":"user","content":[{"type":"text","text":"Describe"},{"type":"image_url","image_url":{"url":"` + url + `"}}]}]`

	// render
	resp := post(t, e.render.URL+pathChatRender, legHeader("", id), `{"model":"sim-model","messages":`+messages+`,"stream":true}`)
	require.Equal(t, http.StatusOK, resp.status, "render: %s", resp.body)
	rendered := jsonOf[renderResp](t, resp.body)
	require.NotNil(t, rendered.Features)
	hash := rendered.Features.MMHashes.Image[0]
	ph := rendered.Features.MMPlaceholders.Image[0]
	ids := mustJSON(t, rendered.TokenIDs)
	features := `{"mm_hashes":{"image":["` + hash + `"]},"mm_placeholders":{"image":[` + mustJSON(t, ph) + `]}}`
	tokens := `{"token_ids":` + ids + `,"features":` + features + `}`

	// conditional-decode: cold prompt → 412
	cond := legHeader("decode", id)
	cond.Set("Prefer", "if-available")
	condBody := `{"model":"sim-model","stream":true,"messages":` + messages + `,"tokens":` + tokens + `}`
	require.Equal(t, http.StatusPreconditionFailed, post(t, e.gateway.URL+pathChat, cond, condBody).status)

	// encode
	encTokens := `{"token_ids":[` + mustJSON(t, rendered.TokenIDs[0]) + `,100300,100300,100300,100300],` +
		`"features":{"mm_hashes":{"image":["` + hash + `"]},"mm_placeholders":{"image":[{"offset":1,"length":4}]}}}`
	resp = post(t, e.gateway.URL+pathChat, legHeader("encode", id),
		`{"model":"sim-model","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"`+url+`"}}]}],`+
			`"tokens":`+encTokens+`,"max_tokens":1,"stream":false}`)
	require.Equal(t, http.StatusOK, resp.status, "encode: %s", resp.body)
	ec := jsonOf[struct {
		EC json.RawMessage `json:"ec_transfer_params"`
	}](t, resp.body).EC

	// prefill
	resp = post(t, e.gateway.URL+pathChat, legHeader("prefill", id),
		`{"model":"sim-model","stream":false,"max_tokens":1,"messages":`+messages+`,"tokens":`+tokens+`,`+
			`"ec_transfer_params":`+string(ec)+`,"kv_transfer_params":{"do_remote_decode":true,"do_remote_prefill":false,`+
			`"remote_engine_id":null,"remote_block_ids":null,"remote_host":null,"remote_port":null}}`)
	require.Equal(t, http.StatusOK, resp.status, "prefill: %s", resp.body)
	var kv map[string]any
	require.NoError(t, json.Unmarshal(jsonOf[chatResp](t, resp.body).KVTransferParams, &kv))
	kv["do_remote_decode"], kv["do_remote_prefill"] = false, true

	// decode, streamed
	resp = post(t, e.gateway.URL+pathChat, legHeader("decode", id),
		`{"model":"sim-model","stream":true,"messages":`+messages+`,"tokens":`+tokens+`,"kv_transfer_params":`+mustJSON(t, kv)+`}`)
	require.Equal(t, http.StatusOK, resp.status, "decode: %s", resp.body)
	got := parseStream(t, resp.body)
	assert.Equal(t, "This answer was streamed", got.text[0])
	assert.Equal(t, "stop", got.finish[0])

	// the same prompt is now warm for conditional-decode
	require.Equal(t, http.StatusOK, post(t, e.gateway.URL+pathChat, cond, condBody).status)

	var profiles []string
	for _, l := range e.sim.Legs() {
		profiles = append(profiles, l.Service+":"+l.Profile)
	}
	assert.Equal(t, []string{"render:", "gateway:decode", "gateway:encode", "gateway:prefill", "gateway:decode", "gateway:decode"}, profiles)
}
