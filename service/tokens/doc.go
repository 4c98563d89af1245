// Package tokens is the tokens-in, tokens-out API of CoordinatorService: a
// TokensRequest written as the vLLM generate body (request.go), and the
// decode worker's answer read back into a TokensResponse or TokensChunk
// messages (answer.go, sink.go), the weights that produced each choice's
// tokens included (versions.go).
package tokens
