// Package legs holds what every leg the steps send to a worker shares: the
// API it is written in (Format) and the path it posts to, the client-fault
// sentinel the leg shapers mark errors with, the edits that shape a leg
// (the single-token cap, nested params), reading a leg's 2xx answer within
// its cap, and the Sink an answer goes on to the client through.
//
// It knows nothing of the pipeline.
package legs

// Format is the OpenAI-compatible API a body is written for. It decides how
// legs are shaped and which worker path they hit.
type Format int

// The formats, with the worker path each one posts to.
const (
	FormatChat        Format = iota + 1 // POST /v1/chat/completions
	FormatCompletions                   // POST /v1/completions
	FormatGenerate                      // POST /inference/v1/generate (tokens-in)
	FormatResponses                     // POST /v1/responses (OpenAI Responses)
	FormatMessages                      // POST /v1/messages (Anthropic Messages)
)

// Worker paths.
const (
	PathChat        = "/v1/chat/completions"
	PathCompletions = "/v1/completions"
	PathGenerate    = "/inference/v1/generate"
	PathResponses   = "/v1/responses"
	PathMessages    = "/v1/messages"
)

// Path is the worker path of the format.
func (f Format) Path() string {
	switch f {
	case FormatChat:
		return PathChat
	case FormatCompletions:
		return PathCompletions
	case FormatResponses:
		return PathResponses
	case FormatMessages:
		return PathMessages
	default:
		return PathGenerate
	}
}

// String names the format as logs and metrics do.
func (f Format) String() string {
	switch f {
	case FormatChat:
		return "chat"
	case FormatCompletions:
		return "completions"
	case FormatGenerate:
		return "generate"
	case FormatResponses:
		return "responses"
	case FormatMessages:
		return "messages"
	default:
		return "unknown"
	}
}

// TakesKVParams reports whether the vLLM endpoint of f reads
// kv_transfer_params, so that a prefill leg in f can hand its KV to a decode
// leg in f. Every one does but Responses: vLLM's ResponsesRequest
// (vllm/entrypoints/openai/responses/protocol.py) has no such field and
// builds its sampling params' extra_args from vllm_xargs alone, whose
// values cannot be objects; unknown fields are ignored. A Responses request
// is decoded where it is served, without a prefill leg
// (docs/responses-messages.md).
func (f Format) TakesKVParams() bool { return f != FormatResponses }

// TakesECParams reports whether the vLLM endpoint of f reads
// ec_transfer_params, so that an encode leg's cache can reach the prefill
// leg in f. Not Responses (above) nor Messages: vLLM's
// AnthropicMessagesRequest (vllm/entrypoints/anthropic/protocol.py) has
// kv_transfer_params but no ec_transfer_params, and its serving copies only
// the former into the chat request it runs.
func (f Format) TakesECParams() bool { return f != FormatResponses && f != FormatMessages }

// ResolveFormat is the format an encode or prefill leg is written in (and
// the path it posts to), given the client's API and the step's
// use_openai_format: a completions request stays completions, and so does
// a Messages request (nothing renders it into token IDs for generate);
// otherwise the flag off means the tokens-in generate format, on means the
// client's own.
func ResolveFormat(inbound Format, useOpenAIFormat bool) Format {
	switch {
	case inbound == FormatCompletions, inbound == FormatMessages:
		return inbound
	case !useOpenAIFormat:
		return FormatGenerate
	default:
		return inbound
	}
}
