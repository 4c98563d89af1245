// Package legs holds what every leg the steps send to a worker shares: the
// API it is written in (Format) and the path it posts to, the client-fault
// sentinel the leg shapers mark errors with, the edits that shape a leg
// (the single-token cap, nested params), and reading a leg's 2xx answer.
//
// It knows nothing of the pipeline: package steps aliases its exported
// names for the rest of the code.
package legs

// Format is the OpenAI-compatible API a body is written for. It decides how
// legs are shaped and which worker path they hit.
type Format int

// The formats, with the worker path each one posts to.
const (
	FormatChat        Format = iota + 1 // POST /v1/chat/completions
	FormatCompletions                   // POST /v1/completions
	FormatGenerate                      // POST /inference/v1/generate (tokens-in)
)

// Worker paths.
const (
	PathChat        = "/v1/chat/completions"
	PathCompletions = "/v1/completions"
	PathGenerate    = "/inference/v1/generate"
)

// Path is the worker path of the format.
func (f Format) Path() string {
	switch f {
	case FormatChat:
		return PathChat
	case FormatCompletions:
		return PathCompletions
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
	default:
		return "unknown"
	}
}

// ResolveFormat is the format an encode or prefill leg is written in (and
// the path it posts to), given the client's API and the step's
// use_openai_format: a completions request stays completions; otherwise the
// flag off means the tokens-in generate format, on means the client's own.
func ResolveFormat(inbound Format, useOpenAIFormat bool) Format {
	switch {
	case inbound == FormatCompletions:
		return FormatCompletions
	case !useOpenAIFormat:
		return FormatGenerate
	default:
		return inbound
	}
}
