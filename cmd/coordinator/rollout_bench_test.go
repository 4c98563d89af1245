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
	"time"

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
// Each iteration runs one round of each path, in turns (the first path
// alternates), after one unmeasured round of each: the machine's drift
// then weighs on both alike, and neither warms the shared simulator up
// for the other. It reports both rates and their ratio, coordinator ÷
// direct.
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
	paths := [2]rolloutPath{
		{one: coordinatorRollout(b, gw.URL, prompt)},
		{one: directRollout(b, worker.URL, prompt)},
	}
	for i := range paths {
		if _, err := rolloutRound(paths[i].one); err != nil {
			b.Fatal(err)
		}
	}
	turn := 0
	for b.Loop() {
		for k := range paths {
			p := &paths[(turn+k)%len(paths)]
			start := time.Now()
			n, err := rolloutRound(p.one)
			if err != nil {
				b.Fatal(err)
			}
			p.tokens += n
			p.took += time.Since(start)
		}
		turn++
	}
	coordinator, direct := paths[0].rate(), paths[1].rate()
	b.ReportMetric(coordinator, "coordinator-tokens/s")
	b.ReportMetric(direct, "direct-tokens/s")
	b.ReportMetric(coordinator/direct, "coordinator/direct")
}

// rolloutPath is one way to run a rollout, and what its measured rounds
// counted.
type rolloutPath struct {
	one    func() (int, error)
	tokens int
	took   time.Duration
}

func (p *rolloutPath) rate() float64 { return float64(p.tokens) / p.took.Seconds() }

// coordinatorRollout is a rollout through the coordinator's GenerateStream
// over gRPC, counting the token IDs it receives.
func coordinatorRollout(b *testing.B, gatewayURL string, prompt []uint32) func() (int, error) {
	st := startStack(b, gatewayURL, "", decodeOnly)
	client := coordinatorv1.NewCoordinatorServiceClient(st.conn)
	req := &coordinatorv1.GenerateStreamRequest{Input: &coordinatorv1.GenerateStreamRequest_Tokens{Tokens: &coordinatorv1.TokensRequest{
		Model: sim.DefaultModel, TokenIds: prompt,
		Sampling: &coordinatorv1.SamplingParams{MaxTokens: proto.Uint32(rolloutTokens), N: rolloutSamples, Logprobs: proto.Uint32(0)},
	}}}
	return func() (int, error) {
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
	}
}

// directRollout is the same rollout sent straight to the worker over HTTP,
// counting its events.
func directRollout(b *testing.B, workerURL string, prompt []uint32) func() (int, error) {
	body := []byte(fmt.Sprintf(`{"model":%q,"token_ids":%s,"sampling_params":{"max_tokens":%d,"n":%d,"logprobs":0},"stream":true}`,
		sim.DefaultModel, jsonIDs(prompt), rolloutTokens, rolloutSamples))
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: rolloutStreams}}
	b.Cleanup(client.CloseIdleConnections)
	return func() (int, error) {
		resp, err := client.Post(workerURL+"/inference/v1/generate", "application/json", bytes.NewReader(body))
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
	}
}

// rolloutRound makes rolloutStreams concurrent calls of one and returns
// the tokens they counted, or the first failure.
func rolloutRound(one func() (int, error)) (int, error) {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		total int
	)
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
	return total, <-errs
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
