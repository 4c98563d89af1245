package rest

import (
	"net/url"
	"testing"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"github.com/grpc-ecosystem/grpc-gateway/v2/utilities"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
)

// TestFrontQueryIsTheDefaultParser checks frontQuery sets what grpc-gateway's
// DefaultQueryParser would, for the front's own query (its fast path) and
// for any other (the fallback), on both inference requests.
func TestFrontQueryIsTheDefaultParser(t *testing.T) {
	t.Parallel()
	queries := []string{
		"openai.endpoint=ENDPOINT_COMPLETIONS&request_id=abc-1",
		"openai.endpoint=ENDPOINT_GENERATE&request_id=",
		"openai.endpoint=3&request_id=x",                              // a number: the default parser's
		"openai.endpoint=NOPE&request_id=x",                           // an unknown name: its error
		"request_id=x&request_id=y&openai.endpoint=ENDPOINT_GENERATE", // repeated
		"request_id=x",
		"request_id=x&openai.endpoint=ENDPOINT_GENERATE&other=1",
		"request_id=x&openai.json=eA",                           // the body's field: filtered out
		"requestId=x&openai.endpoint=ENDPOINT_CHAT_COMPLETIONS", // the JSON name
	}
	newRequests := []func() proto.Message{
		func() proto.Message {
			return &coordinatorv1.GenerateRequest{Input: &coordinatorv1.GenerateRequest_Openai{Openai: &coordinatorv1.OpenAIRequest{}}}
		},
		func() proto.Message {
			return &coordinatorv1.GenerateStreamRequest{Input: &coordinatorv1.GenerateStreamRequest_Openai{Openai: &coordinatorv1.OpenAIRequest{}}}
		},
	}
	// The generated handlers' filter: the body's field is not a query key.
	filter := utilities.NewDoubleArray([][]string{{"openai", "json"}})
	for _, q := range queries {
		values, err := url.ParseQuery(q)
		require.NoError(t, err)
		for _, newRequest := range newRequests {
			got, want := newRequest(), newRequest()
			gotErr := (&frontQuery{}).Parse(got, values, filter)
			wantErr := (&runtime.DefaultQueryParser{}).Parse(want, values, filter)
			assert.Equal(t, wantErr != nil, gotErr != nil, "%s: error %v, default's %v", q, gotErr, wantErr)
			if wantErr == nil { // on an error, what was set depends on the map's order
				assert.True(t, proto.Equal(want, got), "%s: got %v, default parser %v", q, got, want)
			}
		}
	}
}

// TestFrontQuerySetsTheFields checks the fast path's result itself (not
// parallel: AllocsPerRun).
func TestFrontQuerySetsTheFields(t *testing.T) {
	m := &coordinatorv1.GenerateStreamRequest{Input: &coordinatorv1.GenerateStreamRequest_Openai{Openai: &coordinatorv1.OpenAIRequest{Json: []byte(`{}`)}}}
	values := url.Values{queryEndpoint: {"ENDPOINT_COMPLETIONS"}, queryRequestID: {"id-7"}}
	require.NoError(t, (&frontQuery{}).Parse(m, values, nil))
	assert.Equal(t, "id-7", m.GetRequestId())
	assert.Equal(t, coordinatorv1.Endpoint_ENDPOINT_COMPLETIONS, m.GetOpenai().GetEndpoint())
	assert.Equal(t, `{}`, string(m.GetOpenai().GetJson()), "the body is not touched")
	allocs := testing.AllocsPerRun(100, func() { _ = (&frontQuery{}).Parse(m, values, nil) })
	assert.Zero(t, allocs, "the front's query is set without the default parser's reflection")
}
