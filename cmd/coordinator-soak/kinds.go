package main

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"image"
	"image/png"
	"math/rand/v2"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
)

// maxTokens is every request's max_tokens. The simulator then generates
// exactly that many tokens, finish_reason "length".
const maxTokens = 16

// kind is one sort of request the soak sends: a front door (REST or gRPC),
// an input (OpenAI JSON or token IDs), streamed or not.
type kind struct {
	// name labels the kind in the report.
	name string
	// weight is the kind's share of the mix, relative to the others.
	weight int
	// grpc sends it on the gRPC listener; otherwise on REST.
	grpc bool
	// stream asks for a streamed answer.
	stream bool
	// path is the REST path, or the OpenAI endpoint's path for gRPC.
	path string
	// tokens sends a TokensRequest (gRPC only) instead of OpenAI JSON.
	tokens bool
	// legs are the pipeline legs the request reaches, for picking faults
	// it can meet.
	legs legs
	// body writes the OpenAI JSON body of the request with nonce (nil for
	// tokens input).
	body func(dst []byte, nonce uint64) []byte
}

// legs is a set of pipeline legs, by fault target.
type legs uint8

const (
	legRender legs = 1 << iota
	legConditional
	legEncode
	legPrefill
	legDecode
)

// textLegs are the legs of an OpenAI text request through the cascade:
// render, conditional decode (a miss, every prompt being new), prefill,
// decode. Token IDs skip render; an image adds encode.
const (
	textLegs   = legRender | legConditional | legPrefill | legDecode
	tokenLegs  = legConditional | legPrefill | legDecode
	imageLegs  = textLegs | legEncode
	pathChat   = "/v1/chat/completions"
	pathCompl  = "/v1/completions"
	pathTokens = "/inference/v1/generate"
)

// kinds is the mix, about half of it streamed.
var kinds = []kind{
	{name: "rest-chat", weight: 3, path: pathChat, legs: textLegs, body: chatBody(false)},
	{name: "rest-chat-stream", weight: 3, stream: true, path: pathChat, legs: textLegs, body: chatBody(true)},
	{name: "rest-completions-stream", weight: 1, stream: true, path: pathCompl, legs: textLegs, body: completionsBody},
	{name: "rest-image-chat", weight: 1, path: pathChat, legs: imageLegs, body: imageChatBody},
	{name: "grpc-chat", weight: 1, grpc: true, path: pathChat, legs: textLegs, body: chatBody(false)},
	{name: "grpc-chat-stream", weight: 1, grpc: true, stream: true, path: pathChat, legs: textLegs, body: chatBody(true)},
	{name: "grpc-tokens", weight: 1, grpc: true, tokens: true, path: pathTokens, legs: tokenLegs},
	{name: "grpc-tokens-stream", weight: 2, grpc: true, stream: true, tokens: true, path: pathTokens, legs: tokenLegs},
}

// pickKind draws a kind by weight.
func pickKind(r *rand.Rand) *kind {
	total := 0
	for i := range kinds {
		total += kinds[i].weight
	}
	n := r.IntN(total)
	for i := range kinds {
		if n < kinds[i].weight {
			return &kinds[i]
		}
		n -= kinds[i].weight
	}
	panic("unreachable")
}

// Every prompt carries the request's nonce, so no two requests of a run
// share one: the simulator answers a conditional-decode leg only for a
// prompt it served before, and a repeated prompt would end the pipeline
// there, before the prefill leg a fault may target.

// chatBody writes a chat completion request.
func chatBody(stream bool) func([]byte, uint64) []byte {
	return func(dst []byte, nonce uint64) []byte {
		return fmt.Appendf(dst, `{"model":"sim-model","messages":[{"role":"user","content":"Soak request %d: say something."}],"max_tokens":%d,"stream":%t}`,
			nonce, maxTokens, stream)
	}
}

// completionsBody writes a streamed text completion request.
func completionsBody(dst []byte, nonce uint64) []byte {
	return fmt.Appendf(dst, `{"model":"sim-model","prompt":"Soak request %d: once upon a time","max_tokens":%d,"stream":true}`,
		nonce, maxTokens)
}

// imageURI is a small PNG as a data: URI, the image of rest-image-chat.
var imageURI = mustImageURI()

func mustImageURI() string {
	m := image.NewNRGBA(image.Rect(0, 0, 16, 16))
	r := rand.New(rand.NewPCG(7, 8))
	for i := range m.Pix {
		m.Pix[i] = byte(r.Uint32())
	}
	var b bytes.Buffer
	if err := png.Encode(&b, m); err != nil {
		panic(err) // encoding an in-memory image cannot fail
	}
	return "data:image/png;base64," + base64.StdEncoding.EncodeToString(b.Bytes())
}

// imageChatBody writes a chat request with a text part and an inline image.
func imageChatBody(dst []byte, nonce uint64) []byte {
	return fmt.Appendf(dst, `{"model":"sim-model","messages":[{"role":"user","content":[`+
		`{"type":"text","text":"Soak request %d: describe the image."},`+
		`{"type":"image_url","image_url":{"url":"%s"}}]}],"max_tokens":%d,"stream":false}`,
		nonce, imageURI, maxTokens)
}

// tokensRequest is a tokens-in request whose first two token IDs carry the
// nonce (cl100k_base IDs stay below 100000).
func tokensRequest(nonce uint64) *coordinatorv1.TokensRequest {
	const span = 90000
	return &coordinatorv1.TokensRequest{
		Model:    "sim-model",
		TokenIds: []uint32{uint32(1000 + nonce/span%span), uint32(1000 + nonce%span), 9906, 1917},
		Sampling: &coordinatorv1.SamplingParams{MaxTokens: new(uint32(maxTokens))},
	}
}

// endpoint is the gRPC Endpoint of an OpenAI kind.
func (k *kind) endpoint() coordinatorv1.Endpoint {
	if k.path == pathCompl {
		return coordinatorv1.Endpoint_ENDPOINT_COMPLETIONS
	}
	return coordinatorv1.Endpoint_ENDPOINT_CHAT_COMPLETIONS
}
