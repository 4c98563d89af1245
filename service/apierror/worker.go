package apierror

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// maxWorkerMessage bounds the worker's message kept in a status: it travels
// twice in the gRPC trailers (the message and the UpstreamError detail),
// and some gRPC clients cap metadata at 8 KiB.
const maxWorkerMessage = 1024

// workerBody is what workerError reads of a leg's error answer: the OpenAI
// error object {"error":{"message","type","param","code"}} or vLLM's older
// top-level {"object":"error","message","type","param","code"}.
type workerBody struct {
	Error  *workerObject `json:"error"`
	Object string        `json:"object"`
	workerObject
}

type workerObject struct {
	Message string          `json:"message"`
	Param   json.RawMessage `json:"param"`
}

// workerError is the message and param of a leg's answer body when it is an
// OpenAI error object with a message (ok false otherwise: the body stays in
// the logs). The message is cut to maxWorkerMessage bytes; param is "" when
// null or not a string.
func workerError(body []byte) (message, param string, ok bool) {
	if b := bytes.TrimSpace(body); len(b) == 0 || b[0] != '{' {
		return "", "", false
	}
	var w workerBody
	if err := json.Unmarshal(body, &w); err != nil {
		return "", "", false
	}
	o := w.Error
	if o == nil {
		if w.Object != "error" {
			return "", "", false
		}
		o = &w.workerObject
	}
	if o.Message == "" {
		return "", "", false
	}
	_ = json.Unmarshal(o.Param, &param) // null or not a string: ""
	return Truncate(o.Message, maxWorkerMessage), param, true
}

// Truncate cuts s to at most n bytes on a rune boundary, marking the cut:
// a worker's text kept in a status (whose strings must be valid UTF-8).
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n-len("…")]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "…"
}
