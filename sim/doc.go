// Package sim is an embedded simulator of everything the coordinator talks
// to: the Inference Gateway with its encode, prefill and decode worker pools
// (vLLM wire format), and the render service (vLLM render, tokenizing with
// cl100k_base). It serves `make run`, the end-to-end tests and the
// benchmarks without a GPU. Production code must never import it.
//
// Workers answer deterministically, so tests can check every value: chat and
// completions text is [Sentence] cut into its cl100k_base tokens and repeated
// to length; tokens-in (/inference/v1/generate) answers carry the IDs of
// [CompletionTokens]; with sampling_params.logprobs = k each generate choice
// carries vLLM's ChatCompletionLogProbs shape,
// {"content":[{"token":"token_id:<id>","logprob":..,"bytes":null,
// "top_logprobs":[k × {"token":"token_id:<id>","logprob":..,"bytes":null}]}]},
// from [TokenLogprob] and [TopLogprobs]. Completions with logprobs = k carry
// vLLM's CompletionLogProbs (text_offset in code points); chat answers carry
// "logprobs": null. Usage counts the prompt's token IDs, or one token per four
// bytes of messages/prompt JSON when the body carries none. A request without
// max_tokens gets [Options.OutputTokens] tokens and finish_reason "stop";
// with it, exactly max_tokens and "length". A chat continuing its final
// assistant message (continue_final_message) whose content is the first k
// tokens of the chat text ([ChatText]) goes on from token k.
//
// The OpenAI Responses (/v1/responses) and Anthropic Messages
// (/v1/messages) endpoints answer the same text in their own shapes (one
// choice): a response object or a message, usage as input/output tokens
// with input_tokens_details.cached_tokens or cache_read_input_tokens, and
// streams of typed events ("event: response.output_text.delta",
// "event: content_block_delta", ...) without "[DONE]". As in vLLM, a
// Messages leg takes kv_transfer_params (prefill and decode work as for
// chat) and a Responses leg takes none; /v1/messages errors are Anthropic
// error objects.
//
// # Prefill/decode disaggregation
//
// The workers behave as vLLM's do around P/D:
//
//   - The prefill pool and the decode pool each keep a bounded prefix cache
//     of whole 16-token blocks ([PrefixBlockSize]) keyed by model,
//     cache_salt, image hashes and the prompt's tokens; a repeated prompt
//     hits its whole blocks, leaving at least the last token to compute.
//   - A decode request whose kv_transfer_params has do_remote_prefill true
//     counts every prompt token as cached (its KV came from the prefill
//     worker) and answers 500 when asked for the prompt's logprobs
//     (prompt_logprobs, or a completions echo with logprobs): it has the
//     prompt's KV, not its logits.
//   - With [Options.PromptTokensDetails] (vLLM's
//     --enable-prompt-tokens-details) usage carries
//     prompt_tokens_details.cached_tokens, left out of tokens-in answers when
//     zero, as vLLM does.
//   - prompt_logprobs = k (top level; sampling_params for generate) answers
//     vLLM's prompt_logprobs, null for the first token then {"<id>":
//     {"logprob", "rank", "decoded_token"}} with the prompt token first, from
//     [PromptLogprob]: the same values on every pool for the same prompt.
//     They need token IDs (the workers do not tokenize), are never streamed
//     and, as vLLM, a chat or completions stream asking for some is 400.
//   - A completions echo prefixes each choice with the prompt's text (and,
//     with logprobs, its logprobs); with max_tokens 0 it answers the prompt
//     alone (vLLM's echo without generation, one hidden token in usage).
//
// # Gateway
//
// [Sim.Gateway] dispatches on the EPP-Profile header (case-insensitive) to the
// encode, prefill or decode pool; a request without the header goes to decode,
// the EPP default profile. A decode leg whose Prefer header holds the token
// if-available (case-insensitive, comma list) is answered 412 unless the same
// prompt was served before by the decode or prefill pool; the prompt key is the
// model plus the prompt token IDs (tokens.token_ids, a token-array prompt or
// token_ids, with the image mm_hashes) or, without IDs, the messages or prompt
// text. The match is exact, not a real prefix match.
//
// # Engines
//
// Behind each pool stand engines ([Options.Engines], one per role by
// default), each with its own state: pause mode, weight version
// ([DefaultWeightVersion] until set), sleep, the requests it runs. The
// gateway picks the role's engines round robin, skipping stopped ones, or
// the one named by the [EngineHeader] (X-Sim-Engine: decode-1) header; the
// answer names the engine that served it in the same header.
// [Sim.ListenEngines] gives every engine its own loopback listener
// ([Sim.Engines] lists {id, role, address}) serving vLLM's engine control
// routes (vllm/entrypoints/serve/dev/rlhf/api_router.py, .../sleep/) and
// its inference routes:
//
//	POST /pause?mode=abort|wait|keep  {"status":"paused"}; 400 {"error":..} on a bad mode
//	POST /resume                      {"status":"resumed"}
//	GET  /is_paused                   {"is_paused":bool}
//	POST /abort_requests              {"request_ids":[..]} (none: all) → {"status":"aborted","aborted":N}
//	GET  /weight_info                 {"weight_version":".."}
//	POST /update_weight_version       {"new_version":".."} → {"success":true,"new_version":".."}
//	POST /init_weight_transfer_engine {"init_info":{..}} → {"message":..}; 400 without init_info
//	POST /start_weight_update, /update_weights {"update_info":{..}},
//	     /finish_weight_update {"weight_version":".."} → {"message":..}
//	POST /weight_checker              {"action":"checksum|reset|compare"}; 409 while paused or asleep
//	GET  /get_world_size?include_dp=  {"world_size":N} ([Options.WorldSize])
//	POST /sleep?level=&mode=, /wake_up 200, no body; GET /is_sleeping {"is_sleeping":bool}
//
// Errors of FastAPI's own checks answer {"detail": ".."}. Pause modes act
// on requests in flight between two tokens: abort ends them at once with
// finish_reason "abort" and the tokens generated so far (a stream's final
// chunk carries it, then [DONE]); wait answers /pause once they have
// finished; keep freezes them until /resume, losing and repeating no token.
// In every mode new requests are held (not refused) until /resume. A
// sleeping engine answers generation 503; /sleep's mode (abort by default,
// as vLLM's) treats the requests in flight as /pause does, until /wake_up. [Engine.Stop] kills an engine:
// its address refuses connections and its gateway legs in flight are cut.
// abort_requests matches x-request-id and the generate body's request_id.
//
// Tokens-in answers carry, per choice, vLLM's weight_versions: contiguous
// spans [{"version","start","end"}] over output-token indexes naming the
// weights that sampled them, so an update under keep shows mid-answer. A
// stream carries them on its final chunk only, as vLLM does.
//
// # Strict mode
//
// With [Options.Strict] every leg that breaks the coordinator's wire contract
// is answered 400 with a vLLM-shaped error whose message starts with "sim: "
// and names the rule (see strict.go). Request IDs must be unique per client
// request: the decode check looks up the prefill that ran for the same
// x-request-id.
//
// # Faults
//
// A test picks a fault per request with a header the coordinator forwards to
// every leg:
//
//	X-Sim-Fault: <target>=<fault>[, <target>=<fault>...]
//
// Targets: encode, prefill, decode (decode legs without Prefer: if-available,
// and the direct [Sim.Worker]), conditional (decode legs with Prefer:
// if-available), render. Faults:
//
//	status:<code>        answer <code> (400-999; past 599 no HTTP status, as a
//	                     broken worker's) with a vLLM-shaped JSON error body
//	status-once:<code>   the same for the request's first leg only: status:<code>/1
//	hang                 send nothing until the client goes away
//	close                close the connection before any answer (the client
//	                     sees a reset or EOF before the headers)
//	reset-mid-stream     send the headers and the first token (or half the JSON
//	                     body), then abort the connection
//	hang-mid-stream      send the headers and the first token (or half the JSON
//	                     body), then nothing until the client goes away
//	no-kv-params         (prefill) answer 200 without kv_transfer_params, as the
//	                     llm-d inference simulator answers a Messages prefill;
//	                     no effect on other targets
//
// Any fault may end in "/<n>": it then hits only the first n legs of the
// request (counted per x-request-id and target, so a retried leg gets the
// fault n times and is then served normally; the legs of an encode fan-out
// share one count). Counts are kept in memory for the last 10,000 requests
// and forgotten by [Sim.Reset].
//
// With "X-Sim-Retry-After: <seconds>" the injected status answers of the
// request carry "Retry-After: <seconds>". Every answer of a worker or the
// render service carries "X-Sim-Pool: <encode|prefill|decode|render>".
// Validation errors name the field as the error's param (n, max_tokens,
// logprobs), as vLLM's OpenAI error objects do.
//
// A malformed X-Sim-Fault or X-Sim-Retry-After header is answered 400. Examples:
// "X-Sim-Fault: prefill=status:500, decode=hang",
// "X-Sim-Fault: prefill=status-once:503, encode=close/2".
package sim
