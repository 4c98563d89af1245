package sim

import (
	"bytes"
	"encoding/json"
	"mime"
	"net/http"
	"regexp"
)

// Strict-mode rules. Each violation is answered 400 with the message
// "sim: <rule>", so an end-to-end test failing on a wire regression says which
// contract broke:
//
// Every leg (gateway and render):
//   - x-request-id must match ^[A-Za-z0-9-]{1,128}$
//   - a request with a body must have Content-Type application/json
//
// Gateway legs:
//   - EPP-Profile, when present, must be encode, prefill or decode
//   - a /v1/responses leg carries neither kv_transfer_params nor
//     ec_transfer_params, a /v1/messages leg no ec_transfer_params (vLLM
//     ignores them there: a coordinator sending them has a P/D that does not
//     happen)
//
// Prefill and encode legs (the single-token cap):
//   - max_tokens must be 1 (top level for chat and completions,
//     sampling_params.max_tokens for generate); a completions prefill leg
//     with echo may set 0 (vLLM's echo without generation, which still runs
//     one token)
//   - max_completion_tokens and max_output_tokens, when present, must be 1
//   - stream must be present and false
//   - no min_tokens (top level or in sampling_params), no stream_options
//
// Prefill legs:
//   - kv_transfer_params (top level for chat and completions,
//     sampling_params.extra_args for generate) must be an object with
//     do_remote_decode true
//
// Encode legs:
//   - at least one image mm_hash (tokens.features.mm_hashes.image on chat
//     bodies, features.mm_hashes.image otherwise)
//
// Decode legs:
//   - never ec_transfer_params (top level or in extra_args)
//   - a conditional-decode leg (Prefer: if-available) carries no
//     kv_transfer_params
//   - after a prefill for the same x-request-id: kv_transfer_params (same
//     locations as prefill) is an object with do_remote_prefill true and, when
//     the prefill request asked for a connector that forwards the prefill's
//     answer (its kv_transfer_params held more than the two do_remote flags,
//     as kv-nixl and kv-sglang do), the prefill's remote_engine_id. The check
//     consumes the prefill record.

// requestIDPattern is the request id every leg must carry.
var requestIDPattern = regexp.MustCompile(`^[A-Za-z0-9-]{1,128}$`)

// Strict rule messages (without the "sim: " prefix).
const (
	ruleRequestID      = "x-request-id must match ^[A-Za-z0-9-]{1,128}$"
	ruleContentType    = "content-type must be application/json"
	ruleMaxTokens      = " leg must set max_tokens to 1"
	ruleMaxCompletion  = " leg must set max_completion_tokens to 1 when present"
	ruleMaxOutput      = " leg must set max_output_tokens to 1 when present"
	ruleStreamFalse    = " leg must set stream to false"
	ruleMinTokens      = " leg must not carry min_tokens"
	ruleStreamOptions  = " leg must not carry stream_options"
	rulePrefillKV      = "prefill leg must carry kv_transfer_params with do_remote_decode true"
	ruleEncodeHashes   = "encode leg must carry an image mm_hash"
	ruleDecodeEC       = "decode leg must not carry ec_transfer_params"
	ruleConditionalKV  = "conditional-decode leg must not carry kv_transfer_params"
	ruleDecodeKV       = "decode leg after prefill must carry kv_transfer_params with do_remote_prefill true"
	ruleDecodeEngineID = "decode leg after prefill must carry the prefill's remote_engine_id"
	ruleUnknownProfile = "unknown EPP-Profile "
	ruleResponsesKV    = "a /v1/responses leg must not carry kv_transfer_params or ec_transfer_params (vLLM's ResponsesRequest ignores them)"
	ruleMessagesEC     = "a /v1/messages leg must not carry ec_transfer_params (vLLM's AnthropicMessagesRequest ignores it)"
)

// checkHeaders applies the rules every leg shares.
func checkHeaders(r *http.Request, hasBody bool) *apiError {
	if !requestIDPattern.MatchString(r.Header.Get("X-Request-Id")) {
		return strictError(ruleRequestID)
	}
	if hasBody {
		mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
		if err != nil || mt != "application/json" {
			return strictError(ruleContentType)
		}
	}
	return nil
}

// checkCapped applies the single-token rules of prefill and encode legs.
func checkCapped(rl role, req *workerRequest) *apiError {
	name := rl.String()
	if !isNull(req.MinTokens) {
		return strictError(name + ruleMinTokens)
	}
	if req.format == formatGenerate {
		sp := req.SamplingParams
		if sp == nil || sp.MaxTokens == nil || *sp.MaxTokens != 1 {
			return strictError(name + ruleMaxTokens)
		}
		if !isNull(sp.MinTokens) {
			return strictError(name + ruleMinTokens)
		}
	} else if req.MaxTokens == nil || *req.MaxTokens != 1 && !(rl == rolePrefill && req.echoOnly()) {
		return strictError(name + ruleMaxTokens)
	}
	if req.MaxCompletionTokens != nil && *req.MaxCompletionTokens != 1 {
		return strictError(name + ruleMaxCompletion)
	}
	if req.MaxOutputTokens != nil && *req.MaxOutputTokens != 1 {
		return strictError(name + ruleMaxOutput)
	}
	if req.Stream == nil || *req.Stream {
		return strictError(name + ruleStreamFalse)
	}
	if !isNull(req.StreamOptions) {
		return strictError(name + ruleStreamOptions)
	}
	return nil
}

// checkPrefill applies the prefill rules.
func checkPrefill(req *workerRequest) *apiError {
	if err := checkCapped(rolePrefill, req); err != nil {
		return err
	}
	kv, ok := kvObject(req.kvParams())
	if !ok || !bytes.Equal(kv["do_remote_decode"], []byte("true")) {
		return strictError(rulePrefillKV)
	}
	return nil
}

// checkEncode applies the encode rules.
func checkEncode(req *workerRequest) *apiError {
	if err := checkCapped(roleEncode, req); err != nil {
		return err
	}
	if len(req.features().MMHashes.Image) == 0 {
		return strictError(ruleEncodeHashes)
	}
	return nil
}

// checkDecode applies the decode rules; requestID is the leg's x-request-id.
func (s *Sim) checkDecode(req *workerRequest, requestID string, conditional bool) *apiError {
	if req.carriesEC() {
		return strictError(ruleDecodeEC)
	}
	if conditional {
		if !isNull(req.kvParams()) {
			return strictError(ruleConditionalKV)
		}
		return nil
	}
	rec, ok := s.prefilled.get(requestID)
	if !ok {
		return nil
	}
	kv, ok := kvObject(req.kvParams())
	if !ok || !bytes.Equal(kv["do_remote_prefill"], []byte("true")) {
		return strictError(ruleDecodeKV)
	}
	if rec.forwarded {
		var engine string
		if json.Unmarshal(kv["remote_engine_id"], &engine) != nil || engine != rec.engineID {
			return strictError(ruleDecodeEngineID)
		}
	}
	s.prefilled.remove(requestID)
	return nil
}

// kvObject decodes a transfer-params object; ok is false for anything but a
// JSON object.
func kvObject(raw json.RawMessage) (map[string]json.RawMessage, bool) {
	if isNull(raw) {
		return nil, false
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return nil, false
	}
	return m, true
}
