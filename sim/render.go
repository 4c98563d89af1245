package sim

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
)

// Render service paths.
const (
	pathChatRender        = "/v1/chat/completions/render"
	pathCompletionsRender = "/v1/completions/render"
)

// Render returns the simulated render service (vLLM `launch render`):
//
//   - POST /v1/chat/completions/render: one GenerateRequest-shaped object for
//     a chat request, tokenized with cl100k_base through a ChatML template;
//     features is null for text-only chats;
//   - POST /v1/completions/render: a JSON array with one such object per
//     prompt, features null;
//   - GET /health.
//
// The model must be served (404 like the workers); render faults of
// [FaultHeader] apply; in strict mode the shared header rules apply.
func (s *Sim) Render() http.Handler {
	return http.HandlerFunc(s.serveRender)
}

func (s *Sim) serveRender(w http.ResponseWriter, r *http.Request) {
	w.Header().Set(PoolHeader, FaultTargetRender)
	body, readErr := readBody(w, r, s.opts.MaxBodyBytes)
	w = trackStatus(w, s.legs.record(ServiceRender, "", r, body))
	if readErr != nil {
		writeError(w, readErr)
		return
	}
	if r.URL.Path == pathHealth {
		w.WriteHeader(http.StatusOK)
		return
	}
	if r.URL.Path != pathChatRender && r.URL.Path != pathCompletionsRender {
		writeError(w, &apiError{status: http.StatusNotFound, message: "Not Found"})
		return
	}
	if r.Method != http.MethodPost {
		writeError(w, &apiError{status: http.StatusMethodNotAllowed, message: "Method Not Allowed"})
		return
	}
	if s.opts.Strict {
		if err := checkHeaders(r, len(body) > 0); err != nil {
			writeError(w, err)
			return
		}
	}
	faults, apiErr := parseFaults(r.Header)
	if apiErr != nil {
		writeError(w, apiErr)
		return
	}
	s.watchLeg(r, FaultTargetRender)
	f := s.faults.take(faults.target(FaultTargetRender), r.Header.Get("X-Request-Id"), FaultTargetRender)
	if f.inject(w, r) {
		return
	}
	var out any
	if r.URL.Path == pathChatRender {
		out, apiErr = s.renderChat(body, r.Header.Get("X-Request-Id"))
	} else {
		out, apiErr = s.renderCompletions(body, r.Header.Get("X-Request-Id"))
	}
	if apiErr != nil {
		writeError(w, apiErr)
		return
	}
	resp, err := json.Marshal(out)
	if err != nil {
		writeError(w, &apiError{status: http.StatusInternalServerError, message: "sim: encode response: " + err.Error()})
		return
	}
	writeRaw(r.Context(), w, "application/json", resp, f)
}

// renderRequest holds the fields render reads from a chat or completions
// body; the sampling fields are copied into sampling_params as sent.
type renderRequest struct {
	Model               string          `json:"model"`
	Messages            []chatMessage   `json:"messages"`
	Prompt              json.RawMessage `json:"prompt"`
	AddGenerationPrompt *bool           `json:"add_generation_prompt"`
	MaxTokens           *int64          `json:"max_tokens"`
	MaxCompletionTokens *int64          `json:"max_completion_tokens"`
	Temperature         json.RawMessage `json:"temperature"`
	TopP                json.RawMessage `json:"top_p"`
	TopK                json.RawMessage `json:"top_k"`
	N                   json.RawMessage `json:"n"`
	Seed                json.RawMessage `json:"seed"`
	Stop                json.RawMessage `json:"stop"`
	MinTokens           json.RawMessage `json:"min_tokens"`

	// ContinueFinalMessage leaves the final message open (continue_chat.go).
	ContinueFinalMessage *bool `json:"continue_final_message"`
}

// renderOutput is vLLM's GenerateRequest as render returns it.
type renderOutput struct {
	RequestID        string          `json:"request_id"`
	TokenIDs         []uint32        `json:"token_ids"`
	Features         *renderFeatures `json:"features"`
	SamplingParams   renderSampling  `json:"sampling_params"`
	Model            string          `json:"model"`
	Stream           bool            `json:"stream"`
	StreamOptions    json.RawMessage `json:"stream_options"`
	Priority         int             `json:"priority"`
	CacheSalt        json.RawMessage `json:"cache_salt"`
	KVTransferParams json.RawMessage `json:"kv_transfer_params"`
}

type renderFeatures struct {
	MMHashes       modalityStrings      `json:"mm_hashes"`
	MMPlaceholders modalityPlaceholders `json:"mm_placeholders"`
	KwargsData     modalityStrings      `json:"kwargs_data"`
}

type renderSampling struct {
	MaxTokens   int64           `json:"max_tokens"`
	Temperature json.RawMessage `json:"temperature,omitempty"`
	TopP        json.RawMessage `json:"top_p,omitempty"`
	TopK        json.RawMessage `json:"top_k,omitempty"`
	N           json.RawMessage `json:"n,omitempty"`
	Seed        json.RawMessage `json:"seed,omitempty"`
	Stop        json.RawMessage `json:"stop,omitempty"`
	MinTokens   json.RawMessage `json:"min_tokens,omitempty"`
}

// parseRenderRequest decodes a render body and resolves its model.
func (s *Sim) parseRenderRequest(body []byte) (*renderRequest, string, *apiError) {
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return nil, "", badRequest("invalid JSON body: expected a JSON object")
	}
	var req renderRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, "", badRequest("invalid JSON body: %v", err)
	}
	model, ok := s.model(req.Model)
	if !ok {
		return nil, "", modelNotFound(req.Model)
	}
	return &req, model, nil
}

// output builds one GenerateRequest for a rendered prompt.
func (req *renderRequest) output(id, model string, ids []uint32) (renderOutput, *apiError) {
	if len(ids) >= MaxModelLen {
		return renderOutput{}, badRequest("prompt has %d tokens, the maximum context length is %d", len(ids), MaxModelLen)
	}
	maxTokens := int64(MaxModelLen - len(ids))
	if req.MaxCompletionTokens != nil {
		maxTokens = *req.MaxCompletionTokens
	} else if req.MaxTokens != nil {
		maxTokens = *req.MaxTokens
	}
	null := json.RawMessage("null")
	if ids == nil {
		ids = []uint32{}
	}
	return renderOutput{
		RequestID: id,
		TokenIDs:  ids,
		SamplingParams: renderSampling{
			MaxTokens: maxTokens, Temperature: req.Temperature, TopP: req.TopP, TopK: req.TopK,
			N: req.N, Seed: req.Seed, Stop: req.Stop, MinTokens: req.MinTokens,
		},
		Model:            model,
		StreamOptions:    null,
		CacheSalt:        null,
		KVTransferParams: null,
	}, nil
}

func (s *Sim) renderChat(body []byte, requestID string) (any, *apiError) {
	req, model, apiErr := s.parseRenderRequest(body)
	if apiErr != nil {
		return nil, apiErr
	}
	if req.Messages == nil {
		return nil, badRequest("messages: field required")
	}
	tok, err := sharedTokenizer()
	if err != nil {
		return nil, &apiError{status: http.StatusInternalServerError, message: "sim: " + err.Error()}
	}
	ids, images, apiErr := req.chatIDs(tok)
	if apiErr != nil {
		return nil, apiErr
	}
	if requestID == "" {
		requestID = s.fallbackID()
	}
	out, apiErr := req.output("chatcmpl-"+requestID, model, ids)
	if apiErr != nil {
		return nil, apiErr
	}
	if len(images) > 0 {
		f := &renderFeatures{
			MMHashes:       modalityStrings{Image: make([]string, len(images))},
			MMPlaceholders: modalityPlaceholders{Image: make([]placeholder, len(images))},
			KwargsData:     modalityStrings{Image: make([]string, len(images))},
		}
		for i, img := range images {
			f.MMHashes.Image[i] = img.hash
			f.MMPlaceholders.Image[i] = img.placeholder
			f.KwargsData.Image[i] = img.kwargs
		}
		out.Features = f
	}
	return out, nil
}

func (s *Sim) renderCompletions(body []byte, requestID string) (any, *apiError) {
	req, model, apiErr := s.parseRenderRequest(body)
	if apiErr != nil {
		return nil, apiErr
	}
	prompts, apiErr := renderPrompts(req.Prompt)
	if apiErr != nil {
		return nil, apiErr
	}
	if requestID == "" {
		requestID = s.fallbackID()
	}
	outs := make([]renderOutput, len(prompts))
	for i, p := range prompts {
		ids := p.ids
		if !p.isIDs {
			tok, err := sharedTokenizer()
			if err != nil {
				return nil, &apiError{status: http.StatusInternalServerError, message: "sim: " + err.Error()}
			}
			ids = tok.encode(p.text)
		}
		outs[i], apiErr = req.output("cmpl-"+requestID+"-"+strconv.Itoa(i), model, ids)
		if apiErr != nil {
			return nil, apiErr
		}
	}
	return outs, nil
}

// renderPrompt is one completions prompt: text or token IDs.
type renderPrompt struct {
	text  string
	ids   []uint32
	isIDs bool
}

// renderPrompts reads a completions prompt: a string, a token ID list, or a
// batch (list) of either.
func renderPrompts(raw json.RawMessage) ([]renderPrompt, *apiError) {
	if isNull(raw) {
		return nil, badRequest("prompt: field required")
	}
	var text string
	if json.Unmarshal(raw, &text) == nil {
		return []renderPrompt{{text: text}}, nil
	}
	var ids []uint32
	if json.Unmarshal(raw, &ids) == nil {
		return []renderPrompt{{ids: ids, isIDs: true}}, nil
	}
	var batch []json.RawMessage
	if json.Unmarshal(raw, &batch) != nil || len(batch) == 0 {
		return nil, badRequest("prompt: must be a string, a list of token IDs or a non-empty list of either")
	}
	out := make([]renderPrompt, 0, len(batch))
	for i, item := range batch {
		if json.Unmarshal(item, &text) == nil {
			out = append(out, renderPrompt{text: text})
			continue
		}
		ids = nil
		if json.Unmarshal(item, &ids) != nil {
			return nil, badRequest("prompt[%d]: must be a string or a list of token IDs", i)
		}
		out = append(out, renderPrompt{ids: ids, isIDs: true})
	}
	return out, nil
}
