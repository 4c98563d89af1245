package main

import (
	"fmt"
	"slices"
	"strings"
)

// scenario is one kind of request the bench sends to every target. Adding
// a row to scenarios is all a new workload needs: the coordinator is
// started once per distinct pipeline the selected scenarios name.
type scenario struct {
	// name is the -scenarios key and the report's label.
	name string
	// path is the request path, the same on every target.
	path string
	// body is the request body, sent as application/json.
	body []byte
	// stream means the answer is server-sent events.
	stream bool
	// events is the number of SSE events a streamed answer must carry,
	// data: [DONE] included (it must be the last).
	events int
	// pipeline is the coordinator's pipeline.steps, by type.
	pipeline []string
}

// chatTokens is the max_tokens of the chat scenarios. The simulator streams
// one event per token, one finish_reason event and data: [DONE], so a
// streamed chat carries chatTokens+2 = 32 events.
const chatTokens = 30

// decodeOnly is the pipeline of the decode-only scenarios.
var decodeOnly = []string{"decode"}

// scenarios is every workload the bench knows, in report order.
var scenarios = []scenario{
	{
		name:     "chat",
		path:     "/v1/chat/completions",
		body:     chatBody(false),
		pipeline: decodeOnly,
	},
	{
		name:     "chat-stream",
		path:     "/v1/chat/completions",
		body:     chatBody(true),
		stream:   true,
		events:   chatTokens + 2,
		pipeline: decodeOnly,
	},
}

// chatBody is a small chat completion request for the simulator's model.
func chatBody(stream bool) []byte {
	return fmt.Appendf(nil,
		`{"model":"sim-model","messages":[{"role":"system","content":"You are a helpful assistant."},`+
			`{"role":"user","content":"Write one sentence about benchmarks."}],"max_tokens":%d,"stream":%t}`,
		chatTokens, stream)
}

// selectScenarios picks scenarios by a comma list of names, in table order.
func selectScenarios(list string) ([]scenario, error) {
	var picked []scenario
	names := strings.Split(list, ",")
	for i := range names {
		names[i] = strings.TrimSpace(names[i])
	}
	for _, name := range names {
		if name != "" && !slices.ContainsFunc(scenarios, func(s scenario) bool { return s.name == name }) {
			return nil, fmt.Errorf("unknown scenario %q (known: %s)", name, scenarioNames())
		}
	}
	for _, s := range scenarios {
		if slices.Contains(names, s.name) {
			picked = append(picked, s)
		}
	}
	if len(picked) == 0 {
		return nil, fmt.Errorf("no scenario selected (known: %s)", scenarioNames())
	}
	return picked, nil
}

func scenarioNames() string {
	names := make([]string, len(scenarios))
	for i, s := range scenarios {
		names[i] = s.name
	}
	return strings.Join(names, ",")
}
