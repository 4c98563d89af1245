package sim

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var fixedNow = time.Unix(1_700_000_000, 0)

func fixedClock() time.Time { return fixedNow }

type chatResp struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	Model   string `json:"model"`
	Choices []struct {
		Index   int `json:"index"`
		Message struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"message"`
		Text         string          `json:"text"`
		Logprobs     json.RawMessage `json:"logprobs"`
		FinishReason string          `json:"finish_reason"`
	} `json:"choices"`
	Usage            usage           `json:"usage"`
	KVTransferParams json.RawMessage `json:"kv_transfer_params"`
}

type generateResp struct {
	RequestID string `json:"request_id"`
	Choices   []struct {
		Index        int           `json:"index"`
		Logprobs     *chatLogprobs `json:"logprobs"`
		FinishReason *string       `json:"finish_reason"`
		TokenIDs     []uint32      `json:"token_ids"`
	} `json:"choices"`
	Usage            *usage          `json:"usage"`
	KVTransferParams json.RawMessage `json:"kv_transfer_params"`
	ECTransferParams json.RawMessage `json:"ec_transfer_params"`
}

func TestWorkerNonStreaming(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, Options{OutputTokens: 3, Now: fixedClock})
	tests := []struct {
		name, path, body, wantObject, wantText, wantFinish, wantID string
		wantCompletion, wantPrompt                                 int
	}{
		{
			name: "chat with max_tokens", path: pathChat,
			body:       `{"model":"sim-model","messages":[{"role":"user","content":"hi"}],"max_tokens":5}`,
			wantObject: "chat.completion", wantText: "This answer was streamed by", wantFinish: "length",
			wantID: "chatcmpl-req-1", wantCompletion: 5, wantPrompt: 8,
		},
		{
			name: "chat max_completion_tokens wins", path: pathChat,
			body:       `{"model":"sim-model","messages":[],"max_tokens":5,"max_completion_tokens":2,"tokens":{"token_ids":[1,2,3,4]}}`,
			wantObject: "chat.completion", wantText: "This answer", wantFinish: "length",
			wantID: "chatcmpl-req-1", wantCompletion: 2, wantPrompt: 4,
		},
		{
			name: "chat default length stops", path: pathChat,
			body:       `{"model":"sim-model","messages":[{"role":"user","content":"hi"}]}`,
			wantObject: "chat.completion", wantText: "This answer was", wantFinish: "stop",
			wantID: "chatcmpl-req-1", wantCompletion: 3, wantPrompt: 8,
		},
		{
			name: "chat repeats the sentence", path: pathChat,
			body:       `{"model":"sim-model","messages":[],"max_tokens":15}`,
			wantObject: "chat.completion", wantText: Sentence + " This answer", wantFinish: "length",
			wantID: "chatcmpl-req-1", wantCompletion: 15, wantPrompt: 1,
		},
		{
			name: "completions text prompt", path: pathCompletions,
			body:       `{"model":"sim-model","prompt":"Hello","max_tokens":4}`,
			wantObject: "text_completion", wantText: "This answer was streamed", wantFinish: "length",
			wantID: "cmpl-req-1", wantCompletion: 4, wantPrompt: 2,
		},
		{
			name: "completions token prompt", path: pathCompletions,
			body:       `{"model":"sim-model","prompt":[5,6,7]}`,
			wantObject: "text_completion", wantText: "This answer was", wantFinish: "stop",
			wantID: "cmpl-req-1", wantCompletion: 3, wantPrompt: 3,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			resp := post(t, e.worker.URL+tc.path, legHeader("", "req-1"), tc.body)
			require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
			assert.Equal(t, "application/json", resp.header.Get("Content-Type"))
			got := jsonOf[chatResp](t, resp.body)
			assert.Equal(t, tc.wantID, got.ID)
			assert.Equal(t, tc.wantObject, got.Object)
			assert.Equal(t, fixedNow.Unix(), got.Created)
			assert.Equal(t, "sim-model", got.Model)
			require.Len(t, got.Choices, 1)
			text := got.Choices[0].Text
			if tc.path == pathChat {
				assert.Equal(t, "assistant", got.Choices[0].Message.Role)
				text = got.Choices[0].Message.Content
			}
			assert.Equal(t, tc.wantText, text)
			assert.Equal(t, tc.wantFinish, got.Choices[0].FinishReason)
			assert.JSONEq(t, "null", string(got.Choices[0].Logprobs))
			assert.Equal(t, usage{PromptTokens: tc.wantPrompt, CompletionTokens: tc.wantCompletion, TotalTokens: tc.wantPrompt + tc.wantCompletion}, got.Usage)
			assert.Empty(t, got.KVTransferParams, "decode answers carry no kv_transfer_params")
		})
	}
}

func TestWorkerGenerate(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, Options{OutputTokens: 3})
	prompt := []uint32{11, 22, 33}
	tests := []struct {
		name, body, wantID, wantFinish string
		header                         http.Header
		wantTokens                     int
	}{
		{
			name:   "request_id from body",
			body:   `{"request_id":"gen-1","token_ids":[11,22,33],"sampling_params":{"max_tokens":5}}`,
			header: legHeader("", "hdr-1"), wantID: "gen-1", wantFinish: "length", wantTokens: 5,
		},
		{
			name:   "request id from header",
			body:   `{"model":"sim-model","token_ids":[11,22,33],"sampling_params":{}}`,
			header: legHeader("", "hdr-2"), wantID: "hdr-2", wantFinish: "stop", wantTokens: 3,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			resp := post(t, e.worker.URL+pathGenerate, tc.header, tc.body)
			require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
			got := jsonOf[generateResp](t, resp.body)
			assert.Equal(t, tc.wantID, got.RequestID)
			require.Len(t, got.Choices, 1)
			c := got.Choices[0]
			assert.Equal(t, CompletionTokens(prompt, tc.wantTokens, 0), c.TokenIDs)
			require.NotNil(t, c.FinishReason)
			assert.Equal(t, tc.wantFinish, *c.FinishReason)
			assert.Nil(t, c.Logprobs)
			require.NotNil(t, got.Usage)
			assert.Equal(t, usage{PromptTokens: 3, CompletionTokens: tc.wantTokens, TotalTokens: 3 + tc.wantTokens}, *got.Usage)
			assert.JSONEq(t, "null", string(got.KVTransferParams))
			assert.JSONEq(t, "null", string(got.ECTransferParams))
		})
	}
}

func TestWorkerGenerateLogprobs(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, Options{})
	prompt := []uint32{7, 8, 9, 10}
	body := `{"token_ids":[7,8,9,10],"sampling_params":{"max_tokens":4,"n":2,"logprobs":3}}`
	resp := post(t, e.worker.URL+pathGenerate, legHeader("", "lp-1"), body)
	require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
	got := jsonOf[generateResp](t, resp.body)
	require.Len(t, got.Choices, 2)
	for c, choice := range got.Choices {
		assert.Equal(t, c, choice.Index)
		assert.Equal(t, CompletionTokens(prompt, 4, c), choice.TokenIDs)
		require.NotNil(t, choice.Logprobs)
		require.Len(t, choice.Logprobs.Content, 4)
		for i, entry := range choice.Logprobs.Content {
			assert.Equal(t, tokenIDString(choice.TokenIDs[i]), entry.Token)
			assert.Equal(t, TokenLogprob(prompt, c, i), entry.Logprob)
			top := TopLogprobs(prompt, c, i, 3)
			require.Len(t, entry.TopLogprobs, 3)
			for k, alt := range entry.TopLogprobs {
				assert.Equal(t, tokenIDString(top[k].TokenID), alt.Token)
				assert.Equal(t, top[k].Logprob, alt.Logprob)
			}
		}
	}
	assert.Contains(t, string(resp.body), `"bytes":null`, "vLLM serializes absent bytes as null")
}

func TestWorkerChoices(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, Options{})
	resp := post(t, e.worker.URL+pathChat, legHeader("", "n-1"),
		`{"messages":[{"role":"user","content":"x"}],"n":3,"max_tokens":2}`)
	require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
	got := jsonOf[chatResp](t, resp.body)
	require.Len(t, got.Choices, 3)
	for i, c := range got.Choices {
		assert.Equal(t, i, c.Index)
		assert.Equal(t, "This answer", c.Message.Content)
	}
	assert.Equal(t, 6, got.Usage.CompletionTokens)
	assert.Equal(t, DefaultModel, got.Model, "a request without model gets the first served model")
}

func TestWorkerErrors(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, Options{Models: []string{"m-a", "m-b"}})
	tests := []struct {
		name, method, path, body string
		wantStatus               int
		wantType, wantMessage    string
		wantParam                string
	}{
		{
			name: "unknown model chat", path: pathChat, body: `{"model":"x","messages":[]}`,
			wantStatus: 404, wantType: "NotFoundError", wantMessage: "The model `x` does not exist.", wantParam: "model",
		},
		{
			name: "unknown model generate", path: pathGenerate, body: `{"model":"sim-model","token_ids":[1],"sampling_params":{}}`,
			wantStatus: 404, wantType: "NotFoundError", wantMessage: "The model `sim-model` does not exist.", wantParam: "model",
		},
		{name: "malformed JSON", path: pathChat, body: `{"model":`, wantStatus: 400, wantType: "BadRequestError", wantMessage: "invalid JSON body"},
		{name: "null body", path: pathChat, body: `null`, wantStatus: 400, wantType: "BadRequestError", wantMessage: "invalid JSON body"},
		{name: "missing messages", path: pathChat, body: `{"model":"m-b"}`, wantStatus: 400, wantMessage: "messages: field required"},
		{name: "missing prompt", path: pathCompletions, body: `{"model":"m-a"}`, wantStatus: 400, wantMessage: "prompt: field required"},
		{name: "batched prompts", path: pathCompletions, body: `{"prompt":["a","b"]}`, wantStatus: 400, wantMessage: "prompt: the simulator does not support batched prompts"},
		{name: "prompt object", path: pathCompletions, body: `{"prompt":{}}`, wantStatus: 400, wantMessage: "prompt: must be"},
		{name: "generate without token_ids", path: pathGenerate, body: `{"sampling_params":{}}`, wantStatus: 400, wantMessage: "token_ids"},
		{name: "generate negative token", path: pathGenerate, body: `{"token_ids":[-1],"sampling_params":{}}`, wantStatus: 400, wantMessage: "invalid JSON body"},
		{name: "generate without sampling_params", path: pathGenerate, body: `{"token_ids":[1]}`, wantStatus: 400, wantMessage: "sampling_params"},
		{name: "max_tokens zero", path: pathChat, body: `{"messages":[],"max_tokens":0}`, wantStatus: 400, wantMessage: "max_tokens must be between", wantParam: "max_tokens"},
		{name: "max_tokens too large", path: pathCompletions, body: `{"prompt":"x","max_tokens":200000}`, wantStatus: 400, wantMessage: "max_tokens must be between", wantParam: "max_tokens"},
		{name: "too much output", path: pathChat, body: `{"messages":[],"n":100,"max_tokens":100000}`, wantStatus: 400, wantMessage: "sim: n × max_tokens must be at most"},
		{name: "n zero", path: pathChat, body: `{"messages":[],"n":0}`, wantStatus: 400, wantMessage: "n must be between", wantParam: "n"},
		{name: "too many logprobs", path: pathGenerate, body: `{"token_ids":[1],"sampling_params":{"logprobs":21}}`, wantStatus: 400, wantMessage: "logprobs must be at most 20", wantParam: "logprobs"},
		{name: "wrong method", method: http.MethodGet, path: pathChat, wantStatus: 405, wantType: "MethodNotAllowedError"},
		{name: "unknown path", path: "/v1/embeddings", body: `{}`, wantStatus: 404, wantType: "NotFoundError"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			method := tc.method
			if method == "" {
				method = http.MethodPost
			}
			resp := doRequest(t, t.Context(), method, e.worker.URL+tc.path, legHeader("", "err-1"), tc.body)
			require.Equal(t, tc.wantStatus, resp.status, "body: %s", resp.body)
			assert.Equal(t, "application/json", resp.header.Get("Content-Type"))
			got := errorOf(t, resp.body)
			assert.Equal(t, tc.wantStatus, got.Code)
			if tc.wantType != "" {
				assert.Equal(t, tc.wantType, got.Type)
			}
			assert.True(t, strings.HasPrefix(got.Message, tc.wantMessage), "message %q", got.Message)
			if tc.wantParam != "" {
				require.NotNil(t, got.Param)
				assert.Equal(t, tc.wantParam, *got.Param)
			} else {
				assert.Nil(t, got.Param)
			}
		})
	}
}

func TestWorkerModelError(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, Options{})
	resp := post(t, e.worker.URL+pathChat, legHeader("", "m-1"), `{"model":"x","messages":[]}`)
	assert.Equal(t, http.StatusNotFound, resp.status)
	assert.JSONEq(t, "{\"error\":{\"message\":\"The model `x` does not exist.\",\"type\":\"NotFoundError\",\"param\":\"model\",\"code\":404}}", string(resp.body))
}

func TestWorkerModelsAndHealth(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, Options{Models: []string{"a", "b"}, Now: fixedClock})
	resp := doRequest(t, t.Context(), http.MethodGet, e.gateway.URL+pathModels, nil, "")
	require.Equal(t, http.StatusOK, resp.status)
	got := jsonOf[modelList](t, resp.body)
	assert.Equal(t, modelList{Object: "list", Data: []modelCard{
		{ID: "a", Object: "model", Created: fixedNow.Unix(), OwnedBy: "sim", Root: "a", MaxModelLen: MaxModelLen},
		{ID: "b", Object: "model", Created: fixedNow.Unix(), OwnedBy: "sim", Root: "b", MaxModelLen: MaxModelLen},
	}}, got)
	for _, url := range []string{e.gateway.URL, e.worker.URL, e.render.URL} {
		resp := doRequest(t, t.Context(), http.MethodGet, url+pathHealth, nil, "")
		assert.Equal(t, http.StatusOK, resp.status, url)
	}
}
