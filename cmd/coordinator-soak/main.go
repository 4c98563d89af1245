// Command coordinator-soak holds the coordinator under a long mixed load
// with injected faults and checks that it answers every request rightly
// and gives back what it took. On loopback it builds and starts the
// simulator (strict, with a small token delay so streams last) and the
// coordinator on the full cascade of config/dev.yaml with short leg
// timeouts, then keeps -concurrency requests in flight for -duration:
// REST chat and completions, streamed and not, a chat with an inline
// image, gRPC Generate and GenerateStream with OpenAI JSON and with token
// IDs. A share of the requests (-faults) carries a fault for the
// simulator (X-Sim-Fault on the render, encode, prefill, conditional or
// decode leg: an error status, a closed connection, a hang before the
// headers or mid-body, a reset mid-body, and faults on the first legs only
// that the coordinator's retries must absorb), another share
// (-disconnects) goes away mid-stream or mid-pipeline.
//
// Every outcome is classified: ok (the whole, correct answer),
// expected-fault (the right status, final SSE error event or gRPC code for
// the injected fault), disconnected, or unexpected, by cause (a status or
// code, a transport error, a stream cut without an error event, wrong
// content, no answer within -timeout). It prints counts by kind, fault
// and cause, latency percentiles, requests/s, and the coordinator's
// goroutines, RSS and heap (from its /metrics) at rest after the warm-up,
// at their peak, and at rest after the load.
//
// It fails (exit 1) on any unexpected outcome, if the goroutines do not
// come back within 10 of the baseline (the slack covers the runtime's and
// the metrics scrape's own; a leaked request holds several, a leaked
// connection two), or if RSS ends more than max(64 MiB, 50%) above the
// baseline: the baseline already holds a heap sized by the warm-up's
// load, so growth past that bound over a run is retained memory, not GC
// headroom. The coordinator's idle outbound connections close after 1 s,
// so at rest it holds none.
//
//	go run ./cmd/coordinator-soak [-duration 10m] [-concurrency 200] [-faults 0.1] [-disconnects 0.05] [-json out.json]
//
// make soak runs it; make soak SOAK_DURATION=60s is the CI version.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/coordinator-project/coordinator/cmd/internal/procs"
)

func main() {
	procs.Main("coordinator-soak", run)
}

// options are the parsed flags.
type options struct {
	duration        time.Duration
	warmup          time.Duration
	concurrency     int
	faultShare      float64
	disconnectShare float64
	tokenDelay      time.Duration
	timeout         time.Duration
	settle          time.Duration
	seed            uint64
	jsonPath        string
}

func parseFlags(args []string, out io.Writer) (options, error) {
	fs := flag.NewFlagSet("coordinator-soak", flag.ContinueOnError)
	fs.SetOutput(out)
	var o options
	fs.DurationVar(&o.duration, "duration", 10*time.Minute, "how long the load runs, after the warm-up")
	fs.DurationVar(&o.warmup, "warmup", 5*time.Second, "load before the baseline is taken, with the same mix")
	fs.IntVar(&o.concurrency, "concurrency", 200, "requests in flight")
	fs.Float64Var(&o.faultShare, "faults", 0.10, "share of the requests carrying an injected fault")
	fs.Float64Var(&o.disconnectShare, "disconnects", 0.05, "share of the requests whose client goes away early")
	fs.DurationVar(&o.tokenDelay, "token-delay", 5*time.Millisecond, "the simulator's delay between streamed tokens")
	fs.DurationVar(&o.timeout, "timeout", 30*time.Second, "a request not ended by then is a hang")
	fs.DurationVar(&o.settle, "settle", 10*time.Second, "how long the coordinator may take to come to rest")
	fs.Uint64Var(&o.seed, "seed", 1, "seed of the draws of kinds, faults and disconnects")
	fs.StringVar(&o.jsonPath, "json", "", "also write the report as JSON to this file")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	switch {
	case o.duration <= 0 || o.warmup < 0 || o.timeout <= legTimeout || o.settle <= 0:
		return o, fmt.Errorf("-duration and -settle must be positive, -warmup not negative, -timeout above the leg timeout (%v)", legTimeout)
	case o.concurrency < 1:
		return o, errors.New("-concurrency must be at least 1")
	case o.faultShare < 0 || o.disconnectShare < 0 || o.faultShare+o.disconnectShare > 1:
		return o, errors.New("-faults and -disconnects must be shares between 0 and 1, summing to at most 1")
	case o.tokenDelay < 0:
		return o, errors.New("-token-delay must not be negative")
	}
	return o, nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "coordinator-soak-")
	if err != nil {
		return err
	}
	defer func() {
		if err == nil {
			os.RemoveAll(dir)
		} else {
			fmt.Fprintf(stderr, "logs of the simulator and the coordinator kept in %s\n", dir)
		}
	}()
	group := procs.NewGroup(dir)
	defer group.StopAll(10 * time.Second)

	fmt.Fprintln(stderr, "building and starting the simulator and the coordinator...")
	s, err := startStack(ctx, group, o.tokenDelay, max(o.concurrency, 100))
	if err != nil {
		return err
	}
	grpcClient, err := newGRPCClient(s.grpc)
	if err != nil {
		return err
	}
	defer grpcClient.conn.Close()
	rest := newRESTClient(s.rest, o.concurrency)
	r := &runner{rest: rest, grpc: grpcClient, faultShare: o.faultShare, disconnectShare: o.disconnectShare,
		timeout: o.timeout, seed: o.seed}
	return soak(ctx, o, r, rest, newScraper(s.rest), stdout, stderr)
}

// soak warms the stack up, lets it settle, soaks it for o.duration while
// watching the coordinator's metrics, lets it settle again and writes the
// report: an error when the soak failed.
func soak(ctx context.Context, o options, r *runner, rest *restClient, metrics *scraper, stdout, stderr io.Writer) error {
	fmt.Fprintf(stderr, "warm-up: %v at %d concurrent...\n", o.warmup, o.concurrency)
	warm := r.run(ctx, o.concurrency, o.warmup)
	rest.http.CloseIdleConnections()
	start, err := metrics.settle(ctx, o.settle, steady)
	if err != nil {
		return fmt.Errorf("the coordinator did not come to rest after the warm-up (%d goroutines): %w", start.Goroutines, err)
	}
	fmt.Fprintf(stderr, "baseline: %d goroutines, RSS %s; soak: %v at %d concurrent...\n", start.Goroutines, mib(start.RSS), o.duration, o.concurrency)

	stopWatch := metrics.watch(ctx, time.Second)
	stopProgress := r.progress(stderr, 30*time.Second)
	soaked := r.run(ctx, o.concurrency, o.duration)
	stopProgress()
	peak := peakOf(stopWatch(), start)
	if ctx.Err() != nil {
		return ctx.Err()
	}

	rest.http.CloseIdleConnections()
	end, err := metrics.settle(ctx, o.settle, backTo(start.Goroutines+goroutineSlack))
	if err != nil && !errors.Is(err, errUnsettled) {
		return err
	}
	rep := newReport(conditions{
		Duration: o.duration, Warmup: o.warmup, Concurrency: o.concurrency,
		FaultShare: o.faultShare, DisconnectShare: o.disconnectShare,
		TokenDelay: o.tokenDelay, GatewayTimeout: legTimeout, CPUs: runtime.NumCPU(),
	}, soaked, warm)
	rep.Start, rep.Peak, rep.End = start, peakOf(peak, end), end
	rep.judge()
	rep.write(stdout)
	if o.jsonPath != "" {
		if err := rep.writeJSON(o.jsonPath); err != nil {
			return err
		}
	}
	if len(rep.Failures) > 0 {
		return fmt.Errorf("soak failed: %s", strings.Join(rep.Failures, "; "))
	}
	return nil
}
