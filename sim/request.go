package sim

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"hash/maphash"
	"io"
	"net/http"
)

// format is the wire format of a worker endpoint.
type format int

const (
	formatChat format = iota
	formatCompletions
	formatGenerate
	formatResponses // OpenAI Responses (responses.go)
	formatMessages  // Anthropic Messages (messages.go)
)

// Worker endpoint paths.
const (
	pathChat        = "/v1/chat/completions"
	pathCompletions = "/v1/completions"
	pathGenerate    = "/inference/v1/generate"
	pathResponses   = "/v1/responses"
	pathMessages    = "/v1/messages"
	pathModels      = "/v1/models"
	pathHealth      = "/health"
)

// formatOf maps a worker path to its format.
func formatOf(path string) (format, bool) {
	switch path {
	case pathChat:
		return formatChat, true
	case pathCompletions:
		return formatCompletions, true
	case pathGenerate:
		return formatGenerate, true
	case pathResponses:
		return formatResponses, true
	case pathMessages:
		return formatMessages, true
	}
	return 0, false
}

// workerRequest is the union of the chat, completions and generate request
// fields the simulator reads; everything else in the body is ignored.
type workerRequest struct {
	Model               string          `json:"model"`
	RequestID           string          `json:"request_id"`
	Stream              *bool           `json:"stream"`
	StreamOptions       json.RawMessage `json:"stream_options"`
	MaxTokens           *int64          `json:"max_tokens"`
	MaxCompletionTokens *int64          `json:"max_completion_tokens"`
	MaxOutputTokens     *int64          `json:"max_output_tokens"`
	MinTokens           json.RawMessage `json:"min_tokens"`
	N                   *int64          `json:"n"`
	Messages            json.RawMessage `json:"messages"`
	Input               json.RawMessage `json:"input"`        // responses
	System              json.RawMessage `json:"system"`       // messages
	Instructions        json.RawMessage `json:"instructions"` // responses
	Prompt              json.RawMessage `json:"prompt"`
	Tokens              *tokensField    `json:"tokens"`
	TokenIDs            []uint32        `json:"token_ids"`
	Features            *mmFeatures     `json:"features"`
	SamplingParams      *samplingParams `json:"sampling_params"`
	KVTransferParams    json.RawMessage `json:"kv_transfer_params"`
	ECTransferParams    json.RawMessage `json:"ec_transfer_params"`
	CacheSalt           string          `json:"cache_salt"`
	// PromptLogprobs is the top-level prompt_logprobs (chat, completions).
	PromptLogprobs *int64 `json:"prompt_logprobs"`
	// Logprobs is the top-level logprobs: a bool for chat, a count for
	// completions.
	Logprobs json.RawMessage `json:"logprobs"`
	// Echo is the completions echo.
	Echo bool `json:"echo"`
	// ReturnTokenIDs asks a completions answer for its token IDs
	// (continue_completion.go).
	ReturnTokenIDs bool `json:"return_token_ids"`
	// continueFlags ask a chat to continue its final message
	// (continue_chat.go).
	continueFlags

	// Derived by parseWorkerRequest.
	format     format
	promptIDs  []uint32 // nil when the prompt is text
	promptText []byte   // raw messages or prompt JSON when promptIDs is nil
	// templated is a Responses or Messages prompt through the chat
	// template (api_prompt.go), what it counts as; nil: its text counts.
	templated []uint32
}

// tokensField is the coordinator's `tokens` extension on chat bodies.
type tokensField struct {
	TokenIDs []uint32   `json:"token_ids"`
	Features mmFeatures `json:"features"`
}

type mmFeatures struct {
	MMHashes       modalityStrings      `json:"mm_hashes"`
	MMPlaceholders modalityPlaceholders `json:"mm_placeholders"`
}

type modalityStrings struct {
	Image []string `json:"image"`
}

type modalityPlaceholders struct {
	Image []placeholder `json:"image"`
}

type placeholder struct {
	Offset int `json:"offset"`
	Length int `json:"length"`
}

type samplingParams struct {
	MaxTokens      *int64          `json:"max_tokens"`
	MinTokens      json.RawMessage `json:"min_tokens"`
	N              *int64          `json:"n"`
	Logprobs       *int64          `json:"logprobs"`
	PromptLogprobs *int64          `json:"prompt_logprobs"`
	ExtraArgs      *extraArgs      `json:"extra_args"`
}

type extraArgs struct {
	KVTransferParams json.RawMessage `json:"kv_transfer_params"`
	ECTransferParams json.RawMessage `json:"ec_transfer_params"`
}

// Bounds on what one simulated request may ask for.
const (
	maxChoices  = 128
	maxLogprobs = 20
	// maxOutputTokens bounds the tokens of one answer, all choices together.
	maxOutputTokens = 1 << 20
)

// readBody reads the whole request body, at most limit bytes.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, *apiError) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	size := 512
	if r.ContentLength > 0 && r.ContentLength <= limit {
		size = int(r.ContentLength) + 1
	}
	buf := bytes.NewBuffer(make([]byte, 0, size))
	_, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return nil, &apiError{status: http.StatusRequestEntityTooLarge, message: "request body too large"}
		}
		if !errors.Is(err, io.EOF) {
			return nil, badRequest("read body: %v", err)
		}
	}
	return buf.Bytes(), nil
}

// isNull reports whether a raw JSON field is absent or null.
func isNull(raw json.RawMessage) bool {
	return len(raw) == 0 || bytes.Equal(raw, []byte("null"))
}

// parseWorkerRequest decodes a chat, completions or generate body and
// validates what vLLM's schema requires.
func parseWorkerRequest(f format, body []byte) (*workerRequest, *apiError) {
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return nil, badRequest("invalid JSON body: expected a JSON object")
	}
	req := &workerRequest{format: f}
	if err := json.Unmarshal(body, req); err != nil {
		return nil, badRequest("invalid JSON body: %v", err)
	}
	if err := req.readPrompt(); err != nil {
		return nil, err
	}
	if err := req.checkBounds(); err != nil {
		return nil, err
	}
	return req, nil
}

// readPrompt reads the prompt of the request's format: its text or its
// token IDs, and the members that format requires.
func (req *workerRequest) readPrompt() *apiError {
	switch req.format {
	case formatChat:
		if isNull(req.Messages) {
			return badRequest("messages: field required")
		}
		if _, err := req.continueFlags.asked(); err != nil {
			return err
		}
		if req.Tokens != nil && len(req.Tokens.TokenIDs) > 0 {
			req.promptIDs = req.Tokens.TokenIDs
		} else {
			req.promptText = req.Messages
		}
	case formatCompletions:
		if isNull(req.Prompt) && len(req.TokenIDs) > 0 {
			// A generate-shaped body posted to /v1/completions (compat §7.4).
			req.promptIDs = req.TokenIDs
			break
		}
		return req.parsePrompt()
	case formatGenerate:
		if len(req.TokenIDs) == 0 {
			return badRequest("token_ids: must be a non-empty list of token IDs")
		}
		if req.SamplingParams == nil {
			return badRequest("sampling_params: field required")
		}
		req.promptIDs = req.TokenIDs
	case formatResponses:
		if isNull(req.Input) {
			return badParam("input", "input: field required")
		}
		req.promptText = req.Input
		req.templated = req.templateIDs()
	case formatMessages:
		if isNull(req.Messages) {
			return badParam("messages", "messages: field required")
		}
		if req.MaxTokens == nil {
			return badParam("max_tokens", "max_tokens: field required")
		}
		req.promptText = append(append([]byte(nil), req.System...), req.Messages...)
		req.templated = req.templateIDs()
	}
	return nil
}

// checkBounds checks n, max_tokens, logprobs and prompt_logprobs against
// vLLM's bounds and the simulator's.
func (req *workerRequest) checkBounds() *apiError {
	if n := req.choices(); n < 1 || n > maxChoices {
		return badParam("n", "n must be between 1 and %d, got %d", maxChoices, n)
	}
	if m := req.maxTokens(); m != nil && (*m < 1 && !req.echoOnly() || *m > MaxModelLen) {
		return badParam("max_tokens", "max_tokens must be between 1 and %d, got %d", MaxModelLen, *m)
	}
	if m := req.maxTokens(); m != nil && *m*req.choices() > maxOutputTokens {
		return badRequest("sim: n × max_tokens must be at most %d", maxOutputTokens)
	}
	if lp := req.logprobs(); lp > maxLogprobs {
		return badParam("logprobs", "logprobs must be at most %d, got %d", maxLogprobs, lp)
	}
	return req.checkPromptLogprobs()
}

// parsePrompt reads a completions prompt: a string, a token ID array, or a
// one-element batch of either.
func (req *workerRequest) parsePrompt() *apiError {
	raw := bytes.TrimSpace(req.Prompt)
	if isNull(raw) {
		return badRequest("prompt: field required")
	}
	switch raw[0] {
	case '"':
		req.promptText = raw
		return nil
	case '[':
		var ids []uint32
		if err := json.Unmarshal(raw, &ids); err == nil {
			req.promptIDs = ids
			return nil
		}
		var batch []json.RawMessage
		if err := json.Unmarshal(raw, &batch); err != nil {
			return badRequest("prompt: %v", err)
		}
		if len(batch) != 1 {
			return badRequest("prompt: the simulator does not support batched prompts")
		}
		req.Prompt = batch[0]
		if t := bytes.TrimSpace(batch[0]); len(t) > 0 && (t[0] == '"' || t[0] == '[') {
			return req.parsePrompt()
		}
	}
	return badRequest("prompt: must be a string or a list of token IDs")
}

func (req *workerRequest) stream() bool {
	return req.Stream != nil && *req.Stream
}

// maxTokens is the requested output bound, or nil.
func (req *workerRequest) maxTokens() *int64 {
	switch req.format {
	case formatChat:
		if req.MaxCompletionTokens != nil {
			return req.MaxCompletionTokens
		}
		return req.MaxTokens
	case formatGenerate:
		if req.SamplingParams != nil {
			return req.SamplingParams.MaxTokens
		}
		return nil
	case formatResponses:
		return req.MaxOutputTokens
	}
	return req.MaxTokens
}

func (req *workerRequest) choices() int64 {
	n := req.N
	if req.format == formatGenerate && req.SamplingParams != nil {
		n = req.SamplingParams.N
	}
	if n == nil {
		return 1
	}
	return *n
}

// logprobs is sampling_params.logprobs of a generate request, or the
// logprobs count of a completions request; -1 when not asked (chat answers
// carry no logprobs).
func (req *workerRequest) logprobs() int64 {
	switch req.format {
	case formatCompletions:
		var n int64
		if isNull(req.Logprobs) || json.Unmarshal(req.Logprobs, &n) != nil {
			return -1
		}
		return max(0, n)
	case formatGenerate:
		if req.SamplingParams != nil && req.SamplingParams.Logprobs != nil {
			return max(0, *req.SamplingParams.Logprobs)
		}
	}
	return -1
}

// kvParams is kv_transfer_params where the coordinator puts it for this
// format: top level for chat, completions and messages,
// sampling_params.extra_args for generate; none for responses, whose vLLM
// request has no such field (extra fields are ignored).
func (req *workerRequest) kvParams() json.RawMessage {
	switch req.format {
	case formatResponses:
		return nil
	case formatGenerate:
	default:
		return req.KVTransferParams
	}
	if req.SamplingParams == nil || req.SamplingParams.ExtraArgs == nil {
		return nil
	}
	return req.SamplingParams.ExtraArgs.KVTransferParams
}

// carriesEC reports ec_transfer_params at the top level or in extra_args.
func (req *workerRequest) carriesEC() bool {
	if !isNull(req.ECTransferParams) {
		return true
	}
	sp := req.SamplingParams
	return sp != nil && sp.ExtraArgs != nil && !isNull(sp.ExtraArgs.ECTransferParams)
}

// features is the multimodal feature block: tokens.features on chat bodies,
// features on generate-shaped bodies.
func (req *workerRequest) features() *mmFeatures {
	if req.Tokens != nil && len(req.Tokens.Features.MMHashes.Image) > 0 {
		return &req.Tokens.Features
	}
	if req.Features != nil {
		return req.Features
	}
	return &mmFeatures{}
}

// promptTokens is the usage count of the prompt: its token IDs, a
// Responses or Messages conversation's through the chat template, or
// about one token per four bytes of text when the request carries none.
func (req *workerRequest) promptTokens() int {
	if req.promptIDs != nil {
		return len(req.promptIDs)
	}
	if req.templated != nil {
		return len(req.templated)
	}
	return max(1, (len(req.promptText)+3)/4)
}

// promptKey identifies the prompt for the conditional-decode cache: the
// model plus the token IDs and image hashes, or the prompt text.
func (s *Sim) promptKey(model string, req *workerRequest) uint64 {
	var h maphash.Hash
	h.SetSeed(s.seed)
	_, _ = h.WriteString(model)
	_ = h.WriteByte(0)
	if req.promptIDs == nil {
		_ = h.WriteByte('t')
		_, _ = h.Write(req.promptText)
		return h.Sum64()
	}
	_ = h.WriteByte('i')
	var buf [4]byte
	for _, id := range req.promptIDs {
		binary.LittleEndian.PutUint32(buf[:], id)
		_, _ = h.Write(buf[:])
	}
	for _, mm := range req.features().MMHashes.Image {
		_ = h.WriteByte(0)
		_, _ = h.WriteString(mm)
	}
	return h.Sum64()
}
