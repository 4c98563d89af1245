package apierror_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/internal/wire/legs"
	"github.com/coordinator-project/coordinator/service/apierror"
)

func TestDialectOf(t *testing.T) {
	t.Parallel()
	assert.Equal(t, apierror.DialectOpenAI, apierror.DialectOf(legs.FormatChat))
	assert.Equal(t, apierror.DialectOpenAI, apierror.DialectOf(legs.FormatCompletions))
	assert.Equal(t, apierror.DialectOpenAI, apierror.DialectOf(legs.FormatGenerate))
	assert.Equal(t, apierror.DialectResponses, apierror.DialectOf(legs.FormatResponses))
	assert.Equal(t, apierror.DialectMessages, apierror.DialectOf(legs.FormatMessages))
}

func TestAppendErrorByDialect(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		d          apierror.Dialect
		code       int
		param      string
		body, last string
	}{
		{"openai", apierror.DialectOpenAI, 400, "n",
			`{"error":{"message":"m \"q\"","type":"invalid_request_error","param":"n","code":400}}`,
			"data: {\"error\":{\"message\":\"m \\\"q\\\"\",\"type\":\"invalid_request_error\",\"param\":\"n\",\"code\":400}}\n\n"},
		{"responses", apierror.DialectResponses, 502, "",
			`{"error":{"message":"m \"q\"","type":"api_error","param":null,"code":502}}`,
			"event: error\ndata: {\"type\":\"error\",\"code\":\"api_error\",\"message\":\"m \\\"q\\\"\",\"param\":null}\n\n"},
		{"messages 400", apierror.DialectMessages, 400, "n",
			`{"type":"error","error":{"type":"invalid_request_error","message":"m \"q\""}}`,
			"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\",\"message\":\"m \\\"q\\\"\"}}\n\n"},
		{"messages 413", apierror.DialectMessages, 413, "", `{"type":"error","error":{"type":"request_too_large","message":"m \"q\""}}`, ""},
		{"messages 429", apierror.DialectMessages, 429, "", `{"type":"error","error":{"type":"rate_limit_error","message":"m \"q\""}}`, ""},
		{"messages 503", apierror.DialectMessages, 503, "", `{"type":"error","error":{"type":"overloaded_error","message":"m \"q\""}}`, ""},
		{"messages 504", apierror.DialectMessages, 504, "", `{"type":"error","error":{"type":"timeout_error","message":"m \"q\""}}`, ""},
		{"messages 502", apierror.DialectMessages, 502, "", `{"type":"error","error":{"type":"api_error","message":"m \"q\""}}`, ""},
		{"messages 404", apierror.DialectMessages, 404, "", `{"type":"error","error":{"type":"not_found_error","message":"m \"q\""}}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			body := apierror.AppendError(nil, tc.d, tc.code, `m "q"`, tc.param)
			assert.Equal(t, tc.body, string(body))
			assert.True(t, json.Valid(body))
			if tc.last == "" {
				return
			}
			ev := apierror.AppendErrorEvent(nil, tc.d, tc.code, `m "q"`, tc.param)
			require.Equal(t, tc.last, string(ev))
		})
	}
}
