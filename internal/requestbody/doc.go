// Package requestbody is the model of a client's request body, parsed once
// per request and shared by every step: Document (document.go: one
// validating parse, the members the steps read indexed, edits on the
// document or on a leg's copy, written back by reference to the client's
// bytes), Tokens (tokens.go: a prompt's token ids and their JSON, each made
// from the other once), the structure limits (limits.go), the drop of the
// client's transfer params (transfer_params.go, compat D23), and the checks
// of the OpenAI Responses and Anthropic Messages bodies (checks.go,
// openai_responses.go, anthropic_messages.go).
package requestbody
