package control

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
	"github.com/coordinator-project/coordinator/internal/fleet"
	"github.com/coordinator-project/coordinator/service/apierror"
)

// maxAnswerBytes caps an engine's answer to a control route: they are
// small JSON objects (a checksum map is the largest).
const maxAnswerBytes = 1 << 20

// maxErrorText caps the engine's error text kept in a result.
const maxErrorText = 512

// route is one engine control route: its method and path, and its query.
type route struct {
	method, path string
	query        url.Values
}

// name is the route's label in metrics, logs and spans: its path without
// the slash.
func (r route) name() string { return strings.TrimPrefix(r.path, "/") }

// engines calls engines' control routes over HTTP.
type engines struct {
	client *http.Client
}

func newEngines() *engines {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = nil      // the engines are reached directly, whatever HTTP_PROXY says
	t.MaxIdleConns = 0 // no total limit: keep a connection to every engine of a large fleet between calls
	t.MaxIdleConnsPerHost = 4
	t.IdleConnTimeout = 90 * time.Second
	return &engines{client: &http.Client{Transport: t}}
}

// call sends r to w with body (nil: none) within ctx and returns the
// worker's result: ok on a 2xx, the answer's JSON object as body, the
// error text otherwise.
func (e *engines) call(ctx context.Context, w fleet.Worker, r route, body []byte) *coordinatorv1.WorkerResult {
	start := time.Now()
	res := &coordinatorv1.WorkerResult{Worker: workerPB(w)}
	defer func() { res.Latency = durationpb.New(time.Since(start)) }()
	u := "http://" + w.Address + r.path
	if len(r.query) > 0 {
		u += "?" + r.query.Encode()
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, r.method, u, rd)
	if err != nil {
		res.Error = err.Error()
		return res
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := e.client.Do(req)
	if err != nil {
		res.Error = transportError(ctx, err)
		return res
	}
	defer func() { _ = resp.Body.Close() }()
	res.HttpStatus = int32(resp.StatusCode)
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes+1))
	switch {
	case err != nil:
		res.Error = "reading the answer: " + transportError(ctx, err)
		return res
	case len(data) > maxAnswerBytes:
		res.Error = fmt.Sprintf("answer over %d bytes", maxAnswerBytes)
		return res
	}
	res.Body = jsonObject(data)
	if resp.StatusCode/100 != 2 {
		res.Error = fmt.Sprintf("HTTP %d: %s", resp.StatusCode, errorText(data))
		return res
	}
	res.Ok = true
	return res
}

// transportError names a failure to reach the worker: the cause of ctx
// when it ended (the worker's timeout names itself), else the error.
func transportError(ctx context.Context, err error) string {
	if ctx.Err() != nil {
		return context.Cause(ctx).Error()
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err.Error()
	}
	return err.Error()
}

// jsonObject is data as a Struct when it is a JSON object, else nil.
func jsonObject(data []byte) *structpb.Struct {
	data = bytes.TrimSpace(data)
	if len(data) == 0 || data[0] != '{' {
		return nil
	}
	var s structpb.Struct
	if protojson.Unmarshal(data, &s) != nil {
		return nil
	}
	return &s
}

// errorText is an engine's error answer as text: vLLM's "error", "detail"
// or "message" field when it has one, else the answer itself, as valid
// UTF-8 cut on a rune boundary to maxErrorText bytes.
func errorText(data []byte) string {
	var fields struct {
		Error   any `json:"error"`
		Detail  any `json:"detail"`
		Message any `json:"message"`
	}
	text := string(bytes.TrimSpace(data))
	if json.Unmarshal(data, &fields) == nil {
		for _, f := range []any{fields.Error, fields.Detail, fields.Message} {
			if s, ok := f.(string); ok && s != "" {
				text = s
				break
			}
			if m, ok := f.(map[string]any); ok {
				if s, ok := m["message"].(string); ok {
					text = s
					break
				}
			}
		}
	}
	// Kept in a status detail, whose strings must be valid UTF-8.
	return apierror.Truncate(strings.ToValidUTF8(text, "\uFFFD"), maxErrorText)
}

// workerPB is w's message.
func workerPB(w fleet.Worker) *coordinatorv1.Worker {
	return &coordinatorv1.Worker{Id: w.ID, Role: string(w.Role), Address: w.Address}
}
