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
	// newTemplate, when set, builds the template that makes every request's
	// body unique (body is then unused); run calls it for the selected
	// scenarios only, into template.
	newTemplate func() (*template, error)
	template    *template
	// stream means the answer is server-sent events.
	stream bool
	// events is the number of SSE events a streamed answer must carry,
	// data: [DONE] included (it must be the last).
	events int
	// pipeline is the coordinator's pipeline.
	pipeline pipeline
	// cascade measures the scenario on the cascade simulator instead:
	// coordinators with the full cascade and with decode only, no direct
	// and no proxy target (they have no pipeline to compare with).
	cascade bool
	// minPromptTokens is the least usage.prompt_tokens the cascade's
	// preflight accepts (0: not checked).
	minPromptTokens int
	// about describes a cascade scenario's request in the report.
	about string
	// mixed alternates the requests of each worker between body and
	// streamBody (streamed, with events events), half of each.
	mixed      bool
	streamBody []byte
	// conc, when set, replaces -concurrency for this scenario.
	conc []int
	// paced measures the coordinator first in each round and holds the
	// other targets to its request rate, so every process's CPU per
	// request is taken at the same rate (a process's background work, such
	// as the runtime's, is shared by fewer requests at a lower rate).
	paced bool
	// cpuGoal, when set, is the most coordinator CPU per request the
	// scenario accepts, as a multiple of the bare proxy's.
	cpuGoal float64
	// probe, when set, makes the scenario a probe instead of a load cell
	// (memory.go, idle.go); memGoal is a memory probe's most peak RSS over
	// idle, as a multiple of the body's size.
	probe   probeKind
	memGoal float64
}

// probeKind is what a probe scenario measures.
type probeKind int

// The probes.
const (
	noProbe            probeKind = iota
	probeMemory                  // peak RSS over idle for one request (memory.go)
	probeIdleStreams             // goroutines and RSS per idle open stream (idle.go)
	probeControlFanOut           // a control call's time over the slowest engine's (control.go)
)

// pipeline is a coordinator's pipeline section.
type pipeline struct {
	// steps are pipeline.steps, by type. A render step gets the
	// simulator's render service as its address.
	steps []string
	// kv and ec are pipeline.kv_connector and ec_connector ("": default).
	kv, ec string
}

// key names the pipeline among the coordinators the bench starts.
func (p pipeline) key() string {
	return strings.Join(p.steps, ",") + "/" + p.kv + "/" + p.ec
}

// chatTokens is the max_tokens of the chat scenarios. The simulator streams
// one event per token, one finish_reason event and data: [DONE], so a
// streamed chat carries chatTokens+2 = 32 events.
const chatTokens = 30

// decodeOnly is the pipeline of the decode-only scenarios, and the
// baseline of the cascade ones.
var decodeOnly = pipeline{steps: []string{"decode"}}

// cascadePipeline is the full cascade of `make run` (config/dev.yaml).
var cascadePipeline = pipeline{
	steps: []string{"render", "conditional-decode", "encode", "prefill", "decode"},
	kv:    "kv-nixl",
	ec:    "ec-nixl",
}

// epdPipeline is encode, prefill and decode disaggregated behind the
// image download and render steps, without conditional-decode.
var epdPipeline = pipeline{
	steps: []string{"replace-media-urls", "render", "encode", "prefill", "decode"},
	kv:    "kv-nixl",
	ec:    "ec-nixl",
}

// renderPDPipeline is the cascade of a tokens prompt: render validates it,
// conditional-decode misses, prefill and decode run.
var renderPDPipeline = pipeline{
	steps: []string{"render", "conditional-decode", "prefill", "decode"},
	kv:    "kv-nixl",
	ec:    "ec-nixl",
}

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
	{
		name:       "chat-mixed-1kb",
		path:       "/v1/chat/completions",
		body:       chatBody1KB(false),
		streamBody: chatBody1KB(true),
		mixed:      true,
		events:     chatTokens + 2,
		conc:       []int{64},
		pipeline:   decodeOnly,
		cpuGoal:    1.2,
	},
	{
		name:        "epd-image-1mb-text-64k",
		path:        "/v1/chat/completions",
		newTemplate: func() (*template, error) { return imageChat(imageBodyBytes, longTextBytes(64<<10)) },
		conc:        []int{8},
		pipeline:    epdPipeline,
		cpuGoal:     4,
	},
	{
		name:        "epd-image-1mb-text-64k-paced",
		path:        "/v1/chat/completions",
		newTemplate: func() (*template, error) { return imageChat(imageBodyBytes, longTextBytes(64<<10)) },
		conc:        []int{8},
		pipeline:    epdPipeline,
		cpuGoal:     4,
		paced:       true,
	},
	{
		name:        "cascade-image-1mb",
		path:        "/v1/chat/completions",
		newTemplate: func() (*template, error) { return imageChatTemplate(imageBodyBytes) },
		pipeline:    cascadePipeline,
		cascade:     true,
		about:       "chat, a short text part and a 512-pixel-wide noise PNG (RGB, stored) inlined as a data: URI",
	},
	{
		name:            "cascade-prompt-32k",
		path:            "/v1/completions",
		newTemplate:     func() (*template, error) { return tokenPromptTemplate(promptTokens) },
		pipeline:        cascadePipeline,
		cascade:         true,
		minPromptTokens: promptTokens,
		about:           "completions, prompt = 32768 token IDs (render validates them, no render call)",
	},
	{
		name:            "cascade-chat-32k",
		path:            "/v1/chat/completions",
		newTemplate:     longChatTemplate,
		pipeline:        cascadePipeline,
		cascade:         true,
		minPromptTokens: promptTokens,
		about:           "chat, one user message of English words that renders (cl100k_base) to 32768 tokens",
	},
	{
		name:        "mem-tokens-20mb",
		path:        "/v1/completions",
		newTemplate: func() (*template, error) { return tokenPromptOfSize(20_000_000) },
		pipeline:    renderPDPipeline,
		probe:       probeMemory,
		memGoal:     3,
		about:       "completions, a 20 MB token-array prompt, render > conditional-decode > prefill > decode",
	},
	{
		name:        "mem-tokens-20mb-decode",
		path:        "/v1/completions",
		newTemplate: func() (*template, error) { return tokenPromptOfSize(20_000_000) },
		pipeline:    decodeOnly,
		probe:       probeMemory,
		memGoal:     2,
		about:       "the same body, decode only",
	},
	{
		name:        "mem-tokens-64mb",
		path:        "/v1/completions",
		newTemplate: func() (*template, error) { return tokenPromptOfSize(64_000_000) },
		pipeline:    cascadePipeline,
		probe:       probeMemory,
		memGoal:     3,
		about:       "completions, a 64 MB token-array prompt, the full cascade",
	},
	{
		name:        "mem-image-40mb",
		path:        "/v1/chat/completions",
		newTemplate: func() (*template, error) { return imageChat(40<<20, nil) },
		pipeline:    epdPipeline,
		probe:       probeMemory,
		memGoal:     3,
		about:       "chat, a 40 MB data: URI image, replace-media-urls > render > encode > prefill > decode",
	},
	{
		name:        "mem-chat-blocks",
		path:        "/v1/chat/completions",
		newTemplate: func() (*template, error) { return structuredChatTemplate(1, 131_000, 1) },
		pipeline:    decodeOnly,
		probe:       probeMemory,
		memGoal:     3,
		about:       "chat, one message of 131,000 one-letter text blocks (server.max_content_blocks is 131,072), decode only",
	},
	{
		name:        "mem-chat-messages-60mb",
		path:        "/v1/chat/completions",
		newTemplate: func() (*template, error) { return structuredChatTemplate(60_000, 1, 1000) },
		pipeline:    decodeOnly,
		probe:       probeMemory,
		memGoal:     3,
		about:       "chat, 60,000 messages of 1,000 bytes of text (server.max_messages is 65,536), decode only",
	},
	{
		name:     "idle-streams",
		path:     "/v1/chat/completions",
		body:     chatBody(true),
		pipeline: decodeOnly,
		probe:    probeIdleStreams,
		about:    "streamed chats held open after their first event (the simulator's token delay is an hour)",
	},
	{
		name:     "control-fanout",
		pipeline: decodeOnly,
		probe:    probeControlFanOut,
		about:    "ControlService Pause and Resume to 256 engines, over the slowest engine's answer to the same route",
	},
}

// chatBody is a small chat completion request for the simulator's model.
func chatBody(stream bool) []byte {
	return fmt.Appendf(nil,
		`{"model":"sim-model","messages":[{"role":"system","content":"You are a helpful assistant."},`+
			`{"role":"user","content":"Write one sentence about benchmarks."}],"max_tokens":%d,"stream":%t}`,
		chatTokens, stream)
}

// chatBody1KB is a chat completion request of about 1 KB: a system
// prompt and a user question of plain English.
func chatBody1KB(stream bool) []byte {
	return fmt.Appendf(nil,
		`{"model":"sim-model","messages":[{"role":"system","content":"You are a helpful assistant. `+
			`Answer in plain English, keep to the point, say so when you do not know, and never make up facts, names or numbers. `+
			`When a question is ambiguous, ask one short clarifying question before answering."},`+
			`{"role":"user","content":"%s"}],"max_tokens":%d,"temperature":0.7,"top_p":0.95,"stream":%t}`,
		longTextBytes(610), chatTokens, stream)
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
