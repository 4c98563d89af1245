package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// The checks of an answer's content, shared by both front doors.

// errorBody is the OpenAI (and vLLM) error object.
type errorBody struct {
	Error *struct {
		Message string `json:"message"`
		Code    int    `json:"code"`
	} `json:"error"`
}

// errorCode reads the code of an OpenAI error object, failing if data is
// not one.
func errorCode(data []byte) (int, error) {
	var e errorBody
	if err := json.Unmarshal(data, &e); err != nil || e.Error == nil || e.Error.Message == "" {
		return 0, fmt.Errorf("not an OpenAI error object: %s", snippet(data))
	}
	return e.Error.Code, nil
}

// checkErrorBody checks that a non-200 REST answer is an OpenAI error
// object carrying its status.
func checkErrorBody(status int, body []byte) error {
	code, err := errorCode(body)
	if err != nil {
		return err
	}
	if code != status {
		return fmt.Errorf("error code %d in a %d answer", code, status)
	}
	return nil
}

// completion is what the soak checks of a whole OpenAI answer.
type completion struct {
	Choices []json.RawMessage `json:"choices"`
	Usage   *struct {
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
}

// checkCompletion checks a non-streamed OpenAI answer: one choice and
// maxTokens generated tokens.
func checkCompletion(body []byte) error {
	var c completion
	if err := json.Unmarshal(body, &c); err != nil {
		return fmt.Errorf("not a completion: %s", snippet(body))
	}
	if len(c.Choices) != 1 || c.Usage == nil || c.Usage.CompletionTokens != maxTokens {
		return fmt.Errorf("want 1 choice and %d completion tokens: %s", maxTokens, snippet(body))
	}
	return nil
}

// streamChunks is the number of data events of a streamed OpenAI answer
// before [DONE]: one per token, then the finish_reason event.
const streamChunks = maxTokens + 1

// checkChunk checks one data event of a streamed OpenAI answer.
func checkChunk(data []byte) error {
	if !bytes.HasPrefix(data, []byte("{")) || !bytes.Contains(data, []byte(`"choices"`)) {
		return fmt.Errorf("not a completion chunk: %s", snippet(data))
	}
	return nil
}

// errChunkCount is a stream with the wrong number of chunks.
var errChunkCount = fmt.Errorf("want %d chunks before [DONE]", streamChunks)

// snippet is the start of b, for messages.
func snippet(b []byte) string {
	b = bytes.TrimSpace(b)
	if len(b) > 200 {
		return string(b[:200]) + "..."
	}
	return string(b)
}

// Why a request ended early, as the cause of its context.
var (
	errClientTimeout = errors.New("client timeout")
	errDisconnect    = errors.New("client disconnect")
)
