package apierror_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/service/apierror"
	"github.com/coordinator-project/coordinator/steps"
)

func TestOpenAIErrorBody(t *testing.T) {
	t.Parallel()
	tests := []struct {
		code  int
		typ   string
		param string
	}{
		{400, "invalid_request_error", "messages"}, {404, "not_found_error", ""}, {413, "invalid_request_error", ""},
		{429, "rate_limit_error", ""}, {502, "api_error", ""}, {504, "timeout_error", ""},
	}
	for _, tt := range tests {
		var e struct {
			Error struct {
				Message string  `json:"message"`
				Type    string  `json:"type"`
				Param   *string `json:"param"`
				Code    int     `json:"code"`
			} `json:"error"`
		}
		require.NoError(t, json.Unmarshal(apierror.AppendOpenAIError(nil, tt.code, "say \"hi\"\n", tt.param), &e))
		assert.Equal(t, "say \"hi\"\n", e.Error.Message)
		assert.Equal(t, tt.typ, e.Error.Type)
		assert.Equal(t, tt.code, e.Error.Code)
		if tt.param == "" {
			assert.Nil(t, e.Error.Param)
		} else {
			assert.Equal(t, tt.param, *e.Error.Param)
		}
	}
}

func TestOpenAIErrorBytes(t *testing.T) {
	t.Parallel()
	assert.Equal(t, `{"error":{"message":"no route for GET /x","type":"not_found_error","param":null,"code":404}}`,
		string(apierror.AppendOpenAIError(nil, 404, "no route for GET /x", "")))
	assert.Equal(t, `prefix {"error":{"message":"bad","type":"invalid_request_error","param":"messages","code":400}}`,
		string(apierror.AppendOpenAIError([]byte("prefix "), 400, "bad", "messages")), "appends")
}

// The bytes of every refusal the async-broker answers with, as REST
// clients receive them (compat §7.7: no param, a string code).
func TestRefusalBytes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		refusal steps.Refusal
		want    string
	}{
		{"invalid", steps.Refusal{Status: 400, Type: "invalid_request_error", Code: "INVALID_REQUEST", Message: "unknown X-AP-Mode value"},
			`{"error":{"message":"unknown X-AP-Mode value","type":"invalid_request_error","code":"INVALID_REQUEST"}}`},
		{"tenant with a colon", steps.Refusal{Status: 400, Type: "invalid_request_error", Code: "INVALID_REQUEST", Message: `X-Team must not contain ":"`},
			`{"error":{"message":"X-Team must not contain \":\"","type":"invalid_request_error","code":"INVALID_REQUEST"}}`},
		{"unknown", steps.Refusal{Status: 410, Type: "invalid_request_error", Code: "UNKNOWN_REQUEST", Message: "request id is unknown, expired, or already deleted"},
			`{"error":{"message":"request id is unknown, expired, or already deleted","type":"invalid_request_error","code":"UNKNOWN_REQUEST"}}`},
		{"enqueue failed", steps.Refusal{Status: 503, Type: "api_error", Code: "ENQUEUE_FAILED", Message: "request could not be queued: broker unavailable"},
			`{"error":{"message":"request could not be queued: broker unavailable","type":"api_error","code":"ENQUEUE_FAILED"}}`},
		{"deadline", steps.Refusal{Status: 504, Type: "timeout_error", Code: "DEADLINE_EXCEEDED", Message: "request deadline exceeded before a result was produced"},
			`{"error":{"message":"request deadline exceeded before a result was produced","type":"timeout_error","code":"DEADLINE_EXCEEDED"}}`},
		{"stored failure, message escaped", steps.Refusal{Status: 499, Type: "cancelled", Code: "CANCELLED", Message: "line\n\"quoted\" <b>"},
			`{"error":{"message":"line\n\"quoted\" <b>","type":"cancelled","code":"CANCELLED"}}`},
		{"empty message", steps.Refusal{Status: 502, Type: "api_error", Code: "GATE_ERROR"},
			`{"error":{"message":"","type":"api_error","code":"GATE_ERROR"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a := apierror.RefusalAnswer(&tt.refusal)
			assert.Equal(t, tt.refusal.Status, a.Status)
			assert.Equal(t, "application/json", a.ContentType)
			assert.Equal(t, tt.want, string(a.Body))
			assert.True(t, json.Valid(a.Body))
		})
	}
}
