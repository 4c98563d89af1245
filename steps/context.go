package steps

import (
	"encoding/json"
	"net/http"

	"github.com/coordinator-project/coordinator/internal/headers"
	"github.com/coordinator-project/coordinator/internal/requestbody"
	"github.com/coordinator-project/coordinator/internal/wire/features"
	"github.com/coordinator-project/coordinator/internal/wire/legs"
	"github.com/coordinator-project/coordinator/internal/wire/pd"
)

// RequestContext is the state of one request as it moves through the
// pipeline. It lives only as long as the request; steps run one at a time,
// so its fields need no locking (a step that fans out must merge its
// results before it returns).
type RequestContext struct {
	// RequestID is the request's validated or generated id: the client's
	// own, on the answer and in the logs.
	RequestID string
	// LegRequestID is the id every leg of the request carries (see LegID):
	// unique to the request even when its client reuses RequestID (compat
	// D25). Empty: RequestID.
	LegRequestID string
	// Format is the inbound API; Path() is the path decode posts to.
	Format legs.Format
	// Header holds the client headers forwarded on every leg, as the
	// header policy let them through (package headers).
	Header headers.Forwarded
	// DPRank is the data-parallel rank the prefill and decode legs are
	// pinned to (pipeline.dp_size: headers.DPRank of the session, else the
	// request id); empty: not pinned. See PDHeader.
	DPRank string
	// SessionTokens are the phases' own session tokens of a joined
	// x-session-token the client sent back (headers.JoinSessionTokens);
	// Header then holds none. See PDHeader.
	SessionTokens headers.PhaseTokens
	// Body is the client's JSON object exactly as it came; nothing changes
	// it. The body as the steps edited it is Doc.
	Body []byte
	// Doc is Body validated and indexed once, with the steps' edits (see
	// Document). The service sets it; Document() parses Body when it is nil.
	Doc *requestbody.Document
	// Model and Stream are the body's top-level "model" and "stream".
	Model  string
	Stream bool

	// Tokens is the tokenized prompt (render, or the client's tokens).
	Tokens requestbody.Tokens
	// tokensExt caches the chat "tokens" extension every leg carries.
	tokensExt tokensExtension
	// Multimodal lists the prompt's images in order.
	Multimodal []features.MultimodalEntry
	// ECDescriptors holds the ec_transfer_params object each encode leg
	// answered with, in multimodal entry order (nil: that encoder sent
	// none). The prefill step's EC connector merges them.
	ECDescriptors []json.RawMessage
	// PD is the request's prefill/decode state: the prefill answer's
	// kv_transfer_params, whether prefill ran or fell back, what its answer
	// leaves for the client's, and the billed usage.
	PD pd.State

	// Sink receives the client's answer.
	Sink Sink
	// Timings holds how each step went so far (Pipeline.Run appends).
	Timings []Timing
}

// Sink receives the answer of one request. A step calls either Response
// once, or Events for each batch of server-sent events; the first call
// commits the answer (a later error can no longer change its status). A
// step relaying a worker's answer calls Header first, once. A Sink is used
// by one goroutine at a time.
type Sink interface {
	// Header delivers the header of the worker's answer that Response or
	// Events deliver next, as it came (the sink keeps what the header
	// policy lets reach the client: headers.AnswerMetadata). h must not be
	// modified and is not valid after the call.
	Header(h http.Header)
	// Response delivers a whole answer: the worker's status, content type
	// and body. The body becomes the sink's.
	Response(status int, contentType string, body []byte) error
	// Events delivers the data of server-sent events that arrived
	// together, in order, to be sent on at once, with their types: names
	// is nil when none has an "event:" field, else parallel to data ("" for
	// an event without one). The slices are valid only during the call:
	// the caller reuses its buffers.
	Events(data [][]byte, names []string) error
}

// LegID is the id every leg of the request carries as x-request-id, and a
// fresh generate leg as its body's request_id: vLLM names the request's KV
// hand-off by it (NIXL's remote_request_id). It is LegRequestID, else
// RequestID.
func (rc *RequestContext) LegID() string {
	if rc.LegRequestID != "" {
		return rc.LegRequestID
	}
	return rc.RequestID
}

// Document returns the request's document, parsing Body for the request's
// format first when there is none yet (a context built without one, as
// tests build them). A body that does not parse is the client's fault.
func (rc *RequestContext) Document() (*requestbody.Document, error) {
	if rc.Doc != nil {
		return rc.Doc, nil
	}
	doc, err := requestbody.Parse(rc.Body, rc.Format)
	if err != nil {
		return nil, legs.Invalidf("body: %v", err)
	}
	rc.Doc = doc
	return doc, nil
}

// PDHeader is the header of a prefill or decode leg of phase (the
// gateway's EPP profile: "prefill" or "decode"): Header, with
// X-data-parallel-rank when the request is pinned to a rank (DPRank), so
// that both legs, and every turn of a session, reach one rank; and with
// the phase's own x-session-token when the client sent a joined one
// (SessionTokens).
func (rc *RequestContext) PDHeader(phase string) headers.Forwarded {
	token := rc.SessionTokens.Prefill
	if phase != "prefill" {
		token = rc.SessionTokens.Decode
	}
	if rc.DPRank == "" && token == "" {
		return rc.Header
	}
	h := rc.Header.Clone()
	if rc.DPRank != "" {
		h.Set(headers.DataParallelRank, rc.DPRank)
	}
	if token != "" {
		h.Set(headers.SessionToken, token)
	}
	return h
}
