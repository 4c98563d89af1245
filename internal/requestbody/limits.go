package requestbody

import (
	"github.com/coordinator-project/coordinator/internal/jsonbody"
	"github.com/coordinator-project/coordinator/internal/wire/imageparts"
)

// DocumentLimits bound the structure of a request body, counted as it is
// parsed (ParseDocumentLimits): a body past one is refused before anything
// of it is kept, and before any worker parses it into an object per
// value. A zero field takes its default.
type Limits struct {
	// Messages bounds a chat or Messages body's messages, a Responses
	// body's input items (server.max_messages).
	Messages int
	// ContentBlocks bounds the content parts of all the messages together
	// (server.max_content_blocks).
	ContentBlocks int
	// JSONNodes bounds the JSON values of a body of any format at any
	// depth: objects, arrays, strings, numbers, literals, and the token
	// IDs of a prompt (server.max_json_nodes).
	JSONNodes int
}

// The default document limits, which no real request comes near.
const (
	// DefaultMaxMessages: a message costs a few tokens of chat template
	// at least, so even a 1M-token context holds far fewer; today's
	// longest conversations have a few thousand.
	DefaultMaxMessages = 1 << 16
	// DefaultMaxContentBlocks: two per message of the longest
	// conversation, each costing tokens of its own.
	DefaultMaxContentBlocks = 1 << 17
	// DefaultMaxJSONNodes: sixteen times a 1M-token prompt sent as token
	// IDs, so a token prompt at the body cap (64 MiB, 10.6M IDs of 6
	// bytes) passes; only bodies of bare values shorter than 4 bytes reach
	// it. Every value costs a Python worker an object of 30 to 100 bytes;
	// the coordinator keeps none (token IDs are 4 bytes each).
	DefaultMaxJSONNodes = 1 << 24
)

// jsonbody is l as jsonbody counts it, the indexes' counts in the order
// imageparts numbers them.
func (l Limits) jsonbody() *jsonbody.Limits {
	l = l.withDefaults()
	counts := make([]jsonbody.Count, imageparts.CountContentBlocks)
	counts[imageparts.CountMessages-1] = jsonbody.Count{Name: "messages", Max: l.Messages, Key: "server.max_messages"}
	counts[imageparts.CountContentBlocks-1] = jsonbody.Count{Name: "content blocks", Max: l.ContentBlocks, Key: "server.max_content_blocks"}
	return &jsonbody.Limits{
		Nodes:  jsonbody.Count{Name: "JSON values", Max: l.JSONNodes, Key: "server.max_json_nodes"},
		Counts: counts,
	}
}

// withDefaults is l with each zero field its default.
func (l Limits) withDefaults() Limits {
	if l.Messages == 0 {
		l.Messages = DefaultMaxMessages
	}
	if l.ContentBlocks == 0 {
		l.ContentBlocks = DefaultMaxContentBlocks
	}
	if l.JSONNodes == 0 {
		l.JSONNodes = DefaultMaxJSONNodes
	}
	return l
}
