package rest

import (
	"net/url"
	"sync"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"github.com/grpc-ecosystem/grpc-gateway/v2/utilities"
	"google.golang.org/protobuf/proto"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
)

// Query keys the front hands the gateway with each inference request
// (transcode): the fields the body does not carry.
const (
	queryEndpoint  = "openai.endpoint"
	queryRequestID = "request_id"
)

// frontQuery is the gateway's query parameter parser. The front's own
// query on the inference routes is exactly openai.endpoint and request_id
// (transcode), which it sets on Generate's, GenerateStream's and CountTokens'
// requests directly; anything else, and every other message, goes to
// grpc-gateway's DefaultQueryParser, which resolves each key through
// reflection and a regular expression (about a tenth of the front's CPU
// per request when it parsed these two).
type frontQuery struct{ runtime.DefaultQueryParser }

// Parse implements runtime.QueryParameterParser.
func (q *frontQuery) Parse(msg proto.Message, values url.Values, filter *utilities.DoubleArray) error {
	values = storedQuery(msg, values)
	if len(values) != 2 {
		return q.DefaultQueryParser.Parse(msg, values, filter)
	}
	id, idOK := only(values, queryRequestID)
	name, endpointOK := only(values, queryEndpoint)
	endpoint, known := coordinatorv1.Endpoint_value[name]
	if !idOK || !endpointOK || !known {
		return q.DefaultQueryParser.Parse(msg, values, filter)
	}
	switch m := msg.(type) {
	case *coordinatorv1.GenerateRequest:
		if o := m.GetOpenai(); o != nil {
			m.RequestId, o.Endpoint = id, coordinatorv1.Endpoint(endpoint)
			return nil
		}
	case *coordinatorv1.GenerateStreamRequest:
		if o := m.GetOpenai(); o != nil {
			m.RequestId, o.Endpoint = id, coordinatorv1.Endpoint(endpoint)
			return nil
		}
	case *coordinatorv1.CountTokensRequest:
		if o := m.GetOpenai(); o != nil {
			m.RequestId, o.Endpoint = id, coordinatorv1.Endpoint(endpoint)
			return nil
		}
	}
	return q.DefaultQueryParser.Parse(msg, values, filter)
}

// installQueryParser makes frontQuery grpc-gateway's query parameter
// parser. The parser is one for the whole process (SetQueryParameterParser
// sets a package variable whichever mux it is given), so it is set once,
// before the first mux is made, instead of as each mux's option, which
// races with the muxes already serving.
func installQueryParser() {
	queryParserOnce.Do(func() { runtime.SetQueryParameterParser(&frontQuery{})(&runtime.ServeMux{}) })
}

var queryParserOnce sync.Once

// only is values' one value for key.
func only(values url.Values, key string) (string, bool) {
	v := values[key]
	if len(v) != 1 {
		return "", false
	}
	return v[0], true
}
