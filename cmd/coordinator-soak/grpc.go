package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
)

// grpcClient sends the gRPC kinds over one HTTP/2 connection.
type grpcClient struct {
	conn *grpc.ClientConn
	api  coordinatorv1.CoordinatorServiceClient
}

func newGRPCClient(addr string) (*grpcClient, error) {
	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	return &grpcClient{conn: conn, api: coordinatorv1.NewCoordinatorServiceClient(conn)}, nil
}

// faultMetadata is the fault header as gRPC metadata, which the
// coordinator forwards to every leg like a REST header.
var faultMetadata = strings.ToLower(simFaultHeader)

// do sends one request of kind k (body is its OpenAI JSON, nonce its
// tokens-input nonce); see restClient.do for ctx and disconnect.
func (c *grpcClient) do(ctx context.Context, k *kind, f *fault, body []byte, nonce uint64, disconnect func()) observation {
	if f != nil {
		ctx = metadata.AppendToOutgoingContext(ctx, faultMetadata, f.header)
	}
	start := time.Now()
	var o observation
	var err error
	if k.stream {
		err = c.stream(ctx, k, body, nonce, &o, disconnect, start)
	} else {
		err = c.unary(ctx, k, body, nonce, &o)
		o.ttfb = time.Since(start)
	}
	o.total = time.Since(start)
	if err != nil {
		if context.Cause(ctx) != nil {
			return ended(ctx, o, err)
		}
		o.code = status.Code(err)
	}
	return o
}

func (c *grpcClient) unary(ctx context.Context, k *kind, body []byte, nonce uint64, o *observation) error {
	req := &coordinatorv1.GenerateRequest{}
	if k.tokens {
		req.Input = &coordinatorv1.GenerateRequest_Tokens{Tokens: tokensRequest(nonce)}
	} else {
		req.Input = &coordinatorv1.GenerateRequest_Openai{Openai: &coordinatorv1.OpenAIRequest{Endpoint: k.endpoint(), Json: body}}
	}
	resp, err := c.api.Generate(ctx, req)
	if err != nil {
		return err
	}
	if k.tokens {
		o.content = checkTokens(resp.GetTokens().GetChoices())
	} else {
		o.content = checkCompletion(resp.GetOpenai().GetJson())
	}
	return nil
}

// checkTokens checks a tokens answer: one choice of maxTokens tokens,
// finished by length.
func checkTokens(choices []*coordinatorv1.TokensChoice) error {
	if len(choices) != 1 || len(choices[0].GetTokenIds()) != maxTokens || choices[0].GetFinishReason() != coordinatorv1.FinishReason_FINISH_REASON_LENGTH {
		return fmt.Errorf("want 1 choice of %d tokens finished by length, got %v", maxTokens, choices)
	}
	return nil
}

func (c *grpcClient) stream(ctx context.Context, k *kind, body []byte, nonce uint64, o *observation, disconnect func(), start time.Time) error {
	req := &coordinatorv1.GenerateStreamRequest{}
	if k.tokens {
		req.Input = &coordinatorv1.GenerateStreamRequest_Tokens{Tokens: tokensRequest(nonce)}
	} else {
		req.Input = &coordinatorv1.GenerateStreamRequest_Openai{Openai: &coordinatorv1.OpenAIRequest{Endpoint: k.endpoint(), Json: body}}
	}
	stream, err := c.api.GenerateStream(ctx, req)
	if err != nil {
		return err
	}
	var acc streamAccount
	for {
		msg, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			o.content = acc.check(k.tokens)
			return nil
		}
		if err != nil {
			return err
		}
		if o.chunks == 0 {
			o.ttfb = time.Since(start)
		}
		acc.add(msg)
		o.chunks++
		if o.chunks == 1 && disconnect != nil {
			disconnect()
		}
	}
}

// streamAccount adds up a GenerateStream answer for its final check.
type streamAccount struct {
	events, tokens int  // OpenAI data events before [DONE]; token IDs
	done           bool // an OpenAI [DONE] was the last event
	finished       bool // a token choice finished by length
	err            error
}

func (a *streamAccount) add(msg *coordinatorv1.GenerateStreamResponse) {
	for _, data := range msg.GetOpenai().GetData() {
		switch {
		case a.done:
			a.err = errors.New("data after [DONE]")
		case bytes.Equal(data, []byte("[DONE]")):
			a.done = true
		default:
			if err := checkChunk(data); err != nil && a.err == nil {
				a.err = err
			}
			a.events++
		}
	}
	for _, ch := range msg.GetTokens().GetChoices() {
		a.tokens += len(ch.GetTokenIds())
		a.finished = a.finished || ch.GetFinishReason() == coordinatorv1.FinishReason_FINISH_REASON_LENGTH
	}
}

// check judges the whole answer.
func (a *streamAccount) check(tokens bool) error {
	switch {
	case a.err != nil:
		return a.err
	case tokens && (a.tokens != maxTokens || !a.finished):
		return fmt.Errorf("want %d tokens finished by length, got %d (finished: %t)", maxTokens, a.tokens, a.finished)
	case !tokens && (!a.done || a.events != streamChunks):
		return fmt.Errorf("%w, got %d (ended by [DONE]: %t)", errChunkCount, a.events, a.done)
	}
	return nil
}
