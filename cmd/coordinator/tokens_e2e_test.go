package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
	"github.com/coordinator-project/coordinator/internal/headers"
	"github.com/coordinator-project/coordinator/service/apierror"
	"github.com/coordinator-project/coordinator/sim"
	"github.com/coordinator-project/coordinator/steps/steptest"
)

// tokensPrompt spans the whole uint32 range (D16): IDs at and above 2^31
// must reach the workers unchanged.
var tokensPrompt = []uint32{0, 1, 100264, 1<<31 - 1, 1 << 31, 1<<31 + 12345, 1<<32 - 1, 42}

// tokensPromptJSON is tokensPrompt as every leg must carry it.
const tokensPromptJSON = `[0,1,100264,2147483647,2147483648,2147495993,4294967295,42]`

// tokensCase is one tokens request: n choices of maxTokens tokens, with k
// top logprobs per token (k < 0: no logprobs).
type tokensCase struct {
	prompt       []uint32
	n, maxTokens uint32
	k            int
}

func (c tokensCase) request() *coordinatorv1.TokensRequest {
	sp := &coordinatorv1.SamplingParams{MaxTokens: proto.Uint32(c.maxTokens), N: c.n, Temperature: proto.Float32(0.7), Seed: proto.Int64(7)}
	if c.k >= 0 {
		sp.Logprobs = proto.Uint32(uint32(c.k))
	}
	return &coordinatorv1.TokensRequest{Model: sim.DefaultModel, TokenIds: c.prompt, Sampling: sp}
}

// choiceView is a TokensChoice in plain Go values, for readable diffs.
type choiceView struct {
	Index      uint32
	IDs        []uint32
	LogprobIDs []uint32
	Logprobs   []float32
	Top        [][]sim.Logprob
	Finish     coordinatorv1.FinishReason
}

// want is what the simulator generates for the case, choice by choice.
func (c tokensCase) want() []choiceView {
	out := make([]choiceView, max(c.n, 1))
	for i := range out {
		v := choiceView{Index: uint32(i), IDs: sim.CompletionTokens(c.prompt, int(c.maxTokens), i), Finish: coordinatorv1.FinishReason_FINISH_REASON_LENGTH}
		if c.k >= 0 {
			v.LogprobIDs = v.IDs
			for p := range int(c.maxTokens) {
				v.Logprobs = append(v.Logprobs, sim.TokenLogprob(c.prompt, i, p))
				v.Top = append(v.Top, sim.TopLogprobs(c.prompt, i, p, c.k))
			}
		}
		out[i] = v
	}
	return out
}

func (c tokensCase) wantUsage() *coordinatorv1.Usage {
	completion := c.maxTokens * max(c.n, 1)
	return &coordinatorv1.Usage{PromptTokens: uint32(len(c.prompt)), CompletionTokens: completion, TotalTokens: uint32(len(c.prompt)) + completion}
}

// viewOf flattens received choices, merging stream increments by index.
func viewOf(choices []*coordinatorv1.TokensChoice, into []choiceView, streamed bool) ([]choiceView, error) {
	for _, ch := range choices {
		i := int(ch.GetIndex())
		for len(into) <= i {
			into = append(into, choiceView{Index: uint32(len(into))})
		}
		v := &into[i]
		if v.Finish != coordinatorv1.FinishReason_FINISH_REASON_UNSPECIFIED {
			return nil, fmt.Errorf("choice %d: tokens after its finish reason", i)
		}
		v.IDs = append(v.IDs, ch.GetTokenIds()...)
		for _, lp := range ch.GetLogprobs() {
			v.LogprobIDs = append(v.LogprobIDs, lp.GetTokenId())
			v.Logprobs = append(v.Logprobs, lp.GetLogprob())
			top := make([]sim.Logprob, len(lp.GetTopLogprobs()))
			for k, t := range lp.GetTopLogprobs() {
				top[k] = sim.Logprob{TokenID: t.GetTokenId(), Logprob: t.GetLogprob()}
			}
			v.Top = append(v.Top, top)
		}
		if streamed && len(ch.GetLogprobs()) != 0 && len(ch.GetLogprobs()) != len(ch.GetTokenIds()) {
			return nil, fmt.Errorf("choice %d: %d logprobs for %d tokens in one chunk", i, len(ch.GetLogprobs()), len(ch.GetTokenIds()))
		}
		v.Finish = ch.GetFinishReason()
	}
	return into, nil
}

// recvTokens reads a tokens GenerateStream to its clean end: the choices
// merged, and the usage (which must come with the last chunk only).
func recvTokens(stream grpc.ServerStreamingClient[coordinatorv1.GenerateStreamResponse]) ([]choiceView, *coordinatorv1.Usage, int, error) {
	return recvTokensThen(stream, func() {})
}

// recvTokensThen is recvTokens calling first after the first chunk.
func recvTokensThen(stream grpc.ServerStreamingClient[coordinatorv1.GenerateStreamResponse], first func()) ([]choiceView, *coordinatorv1.Usage, int, error) {
	var (
		views  []choiceView
		usage  *coordinatorv1.Usage
		chunks int
	)
	for {
		msg, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return views, usage, chunks, nil
		}
		if err != nil {
			return nil, nil, chunks, err
		}
		chunks++
		if chunks == 1 {
			first()
		}
		chunk := msg.GetTokens()
		if chunk == nil {
			return nil, nil, chunks, errors.New("a chunk that is not tokens")
		}
		if usage != nil {
			return nil, nil, chunks, errors.New("a chunk after the usage")
		}
		usage = chunk.GetUsage()
		if views, err = viewOf(chunk.GetChoices(), views, true); err != nil {
			return nil, nil, chunks, err
		}
	}
}

// tokenIDsOf decodes the token_ids of a generate leg body.
func tokenIDsOf(t *testing.T, body []byte) []uint32 {
	t.Helper()
	var b struct {
		TokenIDs []uint32 `json:"token_ids"`
	}
	require.NoError(t, json.Unmarshal(body, &b), string(body))
	return b.TokenIDs
}

func TestTokensExact(t *testing.T) {
	t.Parallel()
	pipelines := []struct {
		name, yaml string
		legs       []string
	}{
		{name: "cascade", yaml: fullPipeline, legs: []string{
			"gateway:decode:/inference/v1/generate:if-available",
			"gateway:prefill:/inference/v1/generate",
			"gateway:decode:/inference/v1/generate",
		}},
		{name: "decode-only", yaml: decodeOnly, legs: []string{"gateway:decode:/inference/v1/generate"}},
	}
	cases := []struct {
		name string
		tc   tokensCase
	}{
		{name: "n=1 top-5", tc: tokensCase{prompt: tokensPrompt, n: 1, maxTokens: 7, k: 5}},
		{name: "n=4 group top-0", tc: tokensCase{prompt: tokensPrompt, n: 4, maxTokens: 5, k: 0}},
		{name: "n=4 group top-20", tc: tokensCase{prompt: tokensPrompt, n: 4, maxTokens: 3, k: 20}},
		{name: "no logprobs", tc: tokensCase{prompt: tokensPrompt, maxTokens: 6, k: -1}},
	}
	for _, p := range pipelines {
		for _, c := range cases {
			for _, streamed := range []bool{false, true} {
				name := fmt.Sprintf("%s/%s/stream=%t", p.name, c.name, streamed)
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					s, gw, render := startSim(t, sim.Options{Strict: true})
					st := startStack(t, gw, render, p.yaml)
					client := coordinatorv1.NewCoordinatorServiceClient(st.conn)
					id := "tok-" + strings.NewReplacer("/", "-", "=", "-", " ", "-").Replace(name)

					var got []choiceView
					var usage *coordinatorv1.Usage
					if streamed {
						stream, err := client.GenerateStream(context.Background(), &coordinatorv1.GenerateStreamRequest{
							RequestId: id, Input: &coordinatorv1.GenerateStreamRequest_Tokens{Tokens: c.tc.request()},
						})
						require.NoError(t, err)
						got, usage, _, err = recvTokens(stream)
						require.NoError(t, err)
					} else {
						resp, err := client.Generate(context.Background(), &coordinatorv1.GenerateRequest{
							RequestId: id, Input: &coordinatorv1.GenerateRequest_Tokens{Tokens: c.tc.request()},
						})
						require.NoError(t, err)
						assert.Equal(t, id, resp.GetRequestId())
						out := resp.GetTokens()
						require.NotNil(t, out)
						assert.Empty(t, out.GetPromptLogprobs())
						got, err = viewOf(out.GetChoices(), nil, false)
						require.NoError(t, err)
						usage = out.GetUsage()
					}
					assert.Equal(t, c.tc.want(), got)
					assert.True(t, proto.Equal(c.tc.wantUsage(), usage), "usage %v", usage)

					legs := s.Legs()
					require.Equal(t, p.legs, legSummary(legs))
					for _, l := range legs {
						assert.True(t, headers.IsLegRequestID(l.Header.Get("X-Request-Id"), id))
						assert.Equal(t, tokensPromptJSON, string(field(t, l.Body, "token_ids")), "%s: the client's IDs byte for byte", l.Profile)
						assert.Equal(t, c.tc.prompt, tokenIDsOf(t, l.Body))
						assert.JSONEq(t, `"`+l.Header.Get("X-Request-Id")+`"`, string(field(t, l.Body, "request_id")), "the body names the leg as its header does")
					}
					decode := legs[len(legs)-1].Body
					assert.JSONEq(t, fmt.Sprint(streamed), string(field(t, decode, "stream")))
					var sp map[string]json.RawMessage
					require.NoError(t, json.Unmarshal(field(t, decode, "sampling_params"), &sp))
					assert.JSONEq(t, fmt.Sprint(c.tc.maxTokens), string(sp["max_tokens"]))
					assert.JSONEq(t, "0.7", string(sp["temperature"]))
					assert.JSONEq(t, "7", string(sp["seed"]))
					if p.name == "cascade" {
						assert.Contains(t, string(sp["extra_args"]), sim.PrefillEngineID, "decode gets the prefill's KV params")
						prefillSP := string(field(t, legs[1].Body, "sampling_params"))
						assert.Contains(t, prefillSP, `"max_tokens":1`)
					}
				})
			}
		}
	}
}

func TestTokensWithImagesSkipEncode(t *testing.T) {
	t.Parallel()
	s, gw, render := startSim(t, sim.Options{Strict: true})
	st := startStack(t, gw, render, fullPipeline)
	tc := tokensCase{prompt: []uint32{1, 32000, 32000, 32000, 1 << 31, 32000, 32000, 9}, n: 2, maxTokens: 4, k: 2}
	req := tc.request()
	req.CacheSalt = "salt-1"
	req.Features = &coordinatorv1.MultimodalFeatures{
		MmHashes:       []string{"hash-a", "hash-b"},
		MmPlaceholders: []*coordinatorv1.Placeholder{{Offset: 1, Length: 3}, {Offset: 5, Length: 2}},
		KwargsData:     []*coordinatorv1.KwargsItem{{Data: proto.String("dGVuc29y")}, {}},
	}
	resp, err := coordinatorv1.NewCoordinatorServiceClient(st.conn).Generate(context.Background(), &coordinatorv1.GenerateRequest{
		RequestId: "images-1", Input: &coordinatorv1.GenerateRequest_Tokens{Tokens: req},
	})
	require.NoError(t, err)
	got, err := viewOf(resp.GetTokens().GetChoices(), nil, false)
	require.NoError(t, err)
	assert.Equal(t, tc.want(), got)

	legs := s.Legs()
	require.Equal(t, []string{
		"gateway:decode:/inference/v1/generate:if-available",
		"gateway:prefill:/inference/v1/generate",
		"gateway:decode:/inference/v1/generate",
	}, legSummary(legs), "no encode leg: the prefill worker encodes from kwargs_data")
	const features = `{"mm_hashes":{"image":["hash-a","hash-b"]},"mm_placeholders":{"image":[{"offset":1,"length":3},{"offset":5,"length":2}]},` +
		`"kwargs_data":{"image":["dGVuc29y",null]}}`
	for _, l := range legs {
		assert.JSONEq(t, features, string(field(t, l.Body, "features")), l.Profile)
	}
	assert.JSONEq(t, `"salt-1"`, string(field(t, legs[2].Body, "cache_salt")))
}

func TestTokensCacheHitIsExact(t *testing.T) {
	t.Parallel()
	s, gw, render := startSim(t, sim.Options{Strict: true})
	st := startStack(t, gw, render, fullPipeline)
	client := coordinatorv1.NewCoordinatorServiceClient(st.conn)
	tc := tokensCase{prompt: []uint32{3, 1 << 31, 5}, n: 2, maxTokens: 4, k: 3}
	for i, legs := range [][]string{
		{"gateway:decode:/inference/v1/generate:if-available", "gateway:prefill:/inference/v1/generate", "gateway:decode:/inference/v1/generate"},
		{"gateway:decode:/inference/v1/generate:if-available"}, // the prompt is cached: conditional-decode answers
	} {
		before := len(s.Legs())
		stream, err := client.GenerateStream(context.Background(), &coordinatorv1.GenerateStreamRequest{
			RequestId: fmt.Sprintf("hit-%d", i), Input: &coordinatorv1.GenerateStreamRequest_Tokens{Tokens: tc.request()},
		})
		require.NoError(t, err)
		got, usage, _, err := recvTokens(stream)
		require.NoError(t, err)
		assert.Equal(t, tc.want(), got)
		assert.True(t, proto.Equal(tc.wantUsage(), usage), "usage %v", usage)
		assert.Equal(t, legs, legSummary(s.Legs()[before:]))
	}
}

func TestTokensRenderLimits(t *testing.T) {
	t.Parallel()
	s, gw, render := startSim(t, sim.Options{Strict: true})
	st := startStack(t, gw, render, strings.Replace(fullPipeline, `address: "RENDER_URL"`, `address: "RENDER_URL"
        max_total_tokens: 4`, 1))
	req := tokensCase{prompt: []uint32{1, 2, 3, 4, 5}, n: 1, maxTokens: 2, k: -1}.request()
	_, err := coordinatorv1.NewCoordinatorServiceClient(st.conn).Generate(context.Background(), &coordinatorv1.GenerateRequest{
		RequestId: "too-long", Input: &coordinatorv1.GenerateRequest_Tokens{Tokens: req},
	})
	st2 := status.Convert(err)
	assert.Equal(t, codes.InvalidArgument, st2.Code())
	assert.Contains(t, st2.Message(), "too many total tokens: got 5, max 4 (request_id: too-long)")
	assert.Empty(t, s.Legs(), "render's generate branch rejects before any leg")
}

func TestTokensManyStreamsOnOneConnection(t *testing.T) {
	t.Parallel()
	// Slow tokens keep the streams open together.
	_, gw, render := startSim(t, sim.Options{Strict: true, TTFT: 20 * time.Millisecond, TokenDelay: time.Millisecond})
	st := startStack(t, gw, render, fullPipeline)
	client := coordinatorv1.NewCoordinatorServiceClient(st.conn)

	const streams = 64
	errs := make([]error, streams)
	// Every stream reads on only once all have their first chunk: the 64
	// are open at the same time.
	var wg, started sync.WaitGroup
	started.Add(streams)
	for i := range streams {
		wg.Go(func() {
			var once sync.Once
			ready := func() { once.Do(started.Done) }
			defer ready() // a stream that fails early does not hold the others
			tc := tokensCase{prompt: []uint32{uint32(i), 1<<32 - 1 - uint32(i), 1 << 31, 7}, n: uint32(1 + i%4), maxTokens: uint32(4 + i%5), k: i % 4}
			stream, err := client.GenerateStream(context.Background(), &coordinatorv1.GenerateStreamRequest{
				RequestId: fmt.Sprintf("many-%d", i), Input: &coordinatorv1.GenerateStreamRequest_Tokens{Tokens: tc.request()},
			})
			if err != nil {
				errs[i] = err
				return
			}
			got, usage, _, err := recvTokensThen(stream, func() { ready(); started.Wait() })
			switch {
			case err != nil:
				errs[i] = err
			case !assert.ObjectsAreEqual(tc.want(), got):
				errs[i] = fmt.Errorf("choices differ:\nwant %+v\ngot  %+v", tc.want(), got)
			case !proto.Equal(tc.wantUsage(), usage):
				errs[i] = fmt.Errorf("usage: got %v", usage)
			}
		})
	}
	t0 := time.Now()
	started.Wait()
	t.Logf("all started after %v", time.Since(t0))
	wg.Wait()
	t.Logf("all done after %v", time.Since(t0))
	for i, err := range errs {
		assert.NoError(t, err, "stream %d", i)
	}
}

func TestTokensWorkerFailures(t *testing.T) {
	t.Parallel()
	_, gw, render := startSim(t, sim.Options{Strict: true})
	st := startStack(t, gw, render, fullPipeline)
	client := coordinatorv1.NewCoordinatorServiceClient(st.conn)
	// Each case has its own prompt: a prompt served once is a cache hit
	// that conditional-decode answers.
	req := func(i int) *coordinatorv1.TokensRequest {
		return tokensCase{prompt: []uint32{9, 8, uint32(i)}, n: 1, maxTokens: 3, k: 1}.request()
	}

	tests := []struct {
		name, fault string
		model       string
		code        codes.Code
		leg         string
		status      int32
	}{
		{name: "decode 503", fault: "decode=status:503", code: codes.Unavailable, leg: "decode", status: 503},
		{name: "prefill 500", fault: "prefill=status:500", code: codes.Unavailable, leg: "prefill", status: 500},
		{name: "unknown model", model: "nope", code: codes.NotFound, leg: "conditional-decode", status: 404},
	}
	for i, tt := range tests {
		for _, streamed := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/stream=%t", tt.name, streamed), func(t *testing.T) {
				t.Parallel()
				ctx := context.Background()
				if tt.fault != "" {
					ctx = metadata.AppendToOutgoingContext(ctx, "x-sim-fault", tt.fault)
				}
				id := fmt.Sprintf("fail-%d-%t", i, streamed)
				r := req(2 * i)
				if streamed {
					r = req(2*i + 1)
				}
				if tt.model != "" {
					r.Model = tt.model
				}
				var err error
				if streamed {
					var stream grpc.ServerStreamingClient[coordinatorv1.GenerateStreamResponse]
					stream, err = client.GenerateStream(ctx, &coordinatorv1.GenerateStreamRequest{RequestId: id, Input: &coordinatorv1.GenerateStreamRequest_Tokens{Tokens: r}})
					require.NoError(t, err)
					_, _, _, err = recvTokens(stream)
				} else {
					_, err = client.Generate(ctx, &coordinatorv1.GenerateRequest{RequestId: id, Input: &coordinatorv1.GenerateRequest_Tokens{Tokens: r}})
				}
				st := status.Convert(err)
				assert.Equal(t, tt.code, st.Code(), st.Message())
				assert.Contains(t, st.Message(), "(request_id: "+id+")")
				u := apierror.UpstreamDetail(st)
				require.NotNil(t, u)
				assert.Equal(t, tt.leg, u.GetLeg())
				assert.Equal(t, tt.status, u.GetStatusCode())
			})
		}
	}
}

// TestTokensUnreadableAnswer: a decode worker whose 2xx answer is not a
// GenerateResponse fails the request with Internal and the request id.
func TestTokensUnreadableAnswer(t *testing.T) {
	t.Parallel()
	answers := map[string]string{
		"unary":  `{"choices":[{"index":0,"token_ids":"nope"}]}`,
		"stream": "data: {\"choices\":[{\"index\":0,\"token_ids\":[1],\"logprobs\":{\"content\":[{\"token\":\"hello\",\"logprob\":-1}]}}]}\n\n",
	}
	gw := steptest.NewGateway(t, func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.Header.Get("X-Request-Id"), "stream") {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, answers["stream"])
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, answers["unary"])
	})
	st := startStack(t, gw.URL, "", decodeOnly)
	client := coordinatorv1.NewCoordinatorServiceClient(st.conn)
	r := tokensCase{prompt: []uint32{1}, maxTokens: 1, k: 0}.request()

	_, err := client.Generate(context.Background(), &coordinatorv1.GenerateRequest{RequestId: "bad-unary", Input: &coordinatorv1.GenerateRequest_Tokens{Tokens: r}})
	assert.Equal(t, codes.Internal, status.Code(err), err)
	assert.Contains(t, status.Convert(err).Message(), "(request_id: bad-unary)")

	stream, err := client.GenerateStream(context.Background(), &coordinatorv1.GenerateStreamRequest{RequestId: "bad-stream", Input: &coordinatorv1.GenerateStreamRequest_Tokens{Tokens: r}})
	require.NoError(t, err)
	_, _, _, err = recvTokens(stream)
	assert.Equal(t, codes.Internal, status.Code(err), err)
	assert.Contains(t, status.Convert(err).Message(), "(request_id: bad-stream)")
}
