// Package bodykeys is the vocabulary of request bodies: every member name
// the coordinator reads from a client's body or writes into a leg's, in one
// place. A key that only one answer reader knows (an answer's "usage" or
// "choices") stays with that reader.
package bodykeys

// What names the model and asks for a stream.
const (
	Model         = "model"
	Stream        = "stream"         // decided once: requestbody.Document.Stream
	StreamOptions = "stream_options" // include_usage, continuous_usage_stats
	Store         = "store"          // OpenAI Responses: the coordinator keeps no state
	Background    = "background"     // OpenAI Responses
)

// The prompt, in each API's shape.
const (
	Messages = "messages"  // chat completions, Anthropic Messages
	Prompt   = "prompt"    // completions; a rendered prompt on every leg
	Input    = "input"     // OpenAI Responses
	TokenIDs = "token_ids" // /inference/v1/generate; the tokens extension's ids
	Tokens   = "tokens"    // the chat "tokens" extension every leg carries
	Features = "features"  // vLLM's multimodal features of a tokens prompt
)

// Sampling and what the answer holds.
const (
	SamplingParams         = "sampling_params" // /inference/v1/generate
	ExtraArgs              = "extra_args"      // sampling_params.extra_args
	VLLMXargs              = "vllm_xargs"
	MaxTokens              = "max_tokens"
	MaxCompletionTokens    = "max_completion_tokens"
	N                      = "n"
	Echo                   = "echo"
	Logprobs               = "logprobs"
	PromptLogprobs         = "prompt_logprobs"
	ReturnTokensAsTokenIDs = "return_tokens_as_token_ids"
)

// The transfer parameters the coordinator owns (decision D23: a client's are
// dropped, requestbody.DropTransferParams).
const (
	KVTransferParams = "kv_transfer_params"
	ECTransferParams = "ec_transfer_params"
)
