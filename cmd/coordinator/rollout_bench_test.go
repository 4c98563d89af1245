package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"google.golang.org/protobuf/proto"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
	"github.com/coordinator-project/coordinator/sim"
)

// rolloutStreams is the number of concurrent rollouts, as an RL trainer's
// generation batch over one gRPC connection.
const rolloutStreams = 64

// rolloutTokens is the length of each rollout; n samples per prompt.
const (
	rolloutTokens  = 64
	rolloutSamples = 4
)

// BenchmarkRollout measures rollout throughput, generated tokens per
// second, with 64 concurrent token streams (n=4 samples of 64 tokens, with
// logprobs): through the coordinator's gRPC GenerateStream (decode-only
// pipeline, one gRPC connection) against the same requests sent straight to
// the simulated worker's /inference/v1/generate over HTTP. The simulator
// answers without delay, so the figures are the hop's own cost.
//
//	go test -run '^$' -bench Rollout -benchtime 20x ./cmd/coordinator
func BenchmarkRollout(b *testing.B) {
	s := sim.New(sim.Options{})
	worker := httptest.NewServer(s.Worker())
	b.Cleanup(worker.Close)
	gw := httptest.NewServer(s.Gateway())
	b.Cleanup(gw.Close)
	prompt := make([]uint32, 512)
	for i := range prompt {
		prompt[i] = uint32(1000 + i)
	}

	b.Run("coordinator-grpc", func(b *testing.B) {
		st := startStack(b, gw.URL, "", decodeOnly)
		client := coordinatorv1.NewCoordinatorServiceClient(st.conn)
		req := &coordinatorv1.GenerateStreamRequest{Input: &coordinatorv1.GenerateStreamRequest_Tokens{Tokens: &coordinatorv1.TokensRequest{
			Model: sim.DefaultModel, TokenIds: prompt,
			Sampling: &coordinatorv1.SamplingParams{MaxTokens: proto.Uint32(rolloutTokens), N: rolloutSamples, Logprobs: proto.Uint32(0)},
		}}}
		runRollouts(b, func() (int, error) {
			stream, err := client.GenerateStream(context.Background(), req)
			if err != nil {
				return 0, err
			}
			tokens := 0
			for {
				msg, err := stream.Recv()
				if errors.Is(err, io.EOF) {
					return tokens, nil
				}
				if err != nil {
					return tokens, err
				}
				for _, c := range msg.GetTokens().GetChoices() {
					tokens += len(c.GetTokenIds())
				}
			}
		})
	})

	b.Run("direct-worker", func(b *testing.B) {
		body := []byte(fmt.Sprintf(`{"model":%q,"token_ids":%s,"sampling_params":{"max_tokens":%d,"n":%d,"logprobs":0},"stream":true}`,
			sim.DefaultModel, jsonIDs(prompt), rolloutTokens, rolloutSamples))
		client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: rolloutStreams}}
		b.Cleanup(client.CloseIdleConnections)
		runRollouts(b, func() (int, error) {
			resp, err := client.Post(worker.URL+"/inference/v1/generate", "application/json", bytes.NewReader(body))
			if err != nil {
				return 0, err
			}
			defer resp.Body.Close()
			// The worker's events carry the same tokens; count one per
			// generated token as the coordinator's client does.
			events := 0
			sc := bufio.NewScanner(resp.Body)
			for sc.Scan() {
				if bytes.HasPrefix(sc.Bytes(), []byte("data: {")) {
					events++
				}
			}
			return events, sc.Err()
		})
	})
}

// runRollouts runs b.N rounds of rolloutStreams concurrent calls of one and
// reports generated tokens (or events) per second.
func runRollouts(b *testing.B, one func() (int, error)) {
	b.Helper()
	var total int
	var mu sync.Mutex
	b.ResetTimer()
	for b.Loop() {
		var wg sync.WaitGroup
		errs := make(chan error, rolloutStreams)
		for range rolloutStreams {
			wg.Go(func() {
				n, err := one()
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				total += n
				mu.Unlock()
			})
		}
		wg.Wait()
		close(errs)
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(total)/b.Elapsed().Seconds(), "tokens/s")
}

func jsonIDs(ids []uint32) string {
	var buf bytes.Buffer
	buf.WriteByte('[')
	for i, id := range ids {
		if i > 0 {
			buf.WriteByte(',')
		}
		fmt.Fprint(&buf, id)
	}
	buf.WriteByte(']')
	return buf.String()
}
