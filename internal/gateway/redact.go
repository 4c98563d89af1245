package gateway

import (
	"bytes"
	"encoding/json"
	"net/http"
	"sort"
	"strconv"
	"strings"
)

// Redaction limits (compat §5.4): bodies are logged only at trace level,
// and then shortened so that images, URLs, secrets and transfer
// descriptors do not fill the logs.
const (
	redactStringLen = 50
	redactArrayLen  = 10
	redactDepth     = 32
	redactTextLen   = 200
	redactHeaderLen = 256
)

// sensitiveHeaders are never logged.
var sensitiveHeaders = map[string]bool{
	"authorization": true, "proxy-authorization": true, "cookie": true, "set-cookie": true,
	"x-api-key": true, "x-auth-token": true, "api-key": true,
}

// RedactHeaders returns headers as logged: lowercase names, the first value,
// secrets replaced by [REDACTED], long values truncated.
func RedactHeaders(h http.Header) map[string]string {
	out := make(map[string]string, len(h))
	for k, v := range h {
		if len(v) == 0 {
			continue
		}
		lk := strings.ToLower(k)
		switch {
		case sensitiveHeaders[lk]:
			out[lk] = "[REDACTED]"
		case len(v[0]) > redactHeaderLen:
			out[lk] = v[0][:redactHeaderLen] + "...[truncated]"
		default:
			out[lk] = v[0]
		}
	}
	return out
}

// RedactBody returns a body as logged: JSON with long strings replaced
// ([base64] for data: URIs, [url] for links, ... otherwise), arrays cut to
// 10 elements with a "... +N more" marker and nesting cut at depth 32;
// anything else as text cut at 200 bytes.
func RedactBody(body []byte) string {
	var v any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		if len(body) > redactTextLen {
			return string(body[:redactTextLen]) + "..."
		}
		return string(body)
	}
	out, _ := json.Marshal(redactValue(v, 0))
	return string(out)
}

func redactValue(v any, depth int) any {
	if depth >= redactDepth {
		return "[truncated]"
	}
	switch x := v.(type) {
	case string:
		if len(x) <= redactStringLen {
			return x
		}
		switch {
		case strings.HasPrefix(x, "data:"):
			return "[base64]"
		case strings.HasPrefix(x, "http://"), strings.HasPrefix(x, "https://"):
			return "[url]"
		default:
			return "..."
		}
	case []any:
		n := min(len(x), redactArrayLen)
		out := make([]any, 0, n+1)
		for _, e := range x[:n] {
			out = append(out, redactValue(e, depth+1))
		}
		if len(x) > n {
			out = append(out, "... +"+strconv.Itoa(len(x)-n)+" more")
		}
		return out
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		out := make(map[string]any, len(x))
		for _, k := range keys {
			out[k] = redactValue(x[k], depth+1)
		}
		return out
	default:
		return v
	}
}
