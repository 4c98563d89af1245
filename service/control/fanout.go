package control

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/types/known/durationpb"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
	"github.com/coordinator-project/coordinator/internal/fleet"
)

var tracer = otel.Tracer("github.com/coordinator-project/coordinator/service/control")

// fanOut runs do for every worker (workers[i] is w), at most concurrency at once, each under
// a timeout of its own and a span of its own (a child of the call's), and
// returns one result per worker in workers' order. A worker not started
// before ctx ended gets a result naming why; do must return a non-nil
// result and honour its context.
func fanOut(ctx context.Context, name string, workers []fleet.Worker, concurrency int, timeout time.Duration,
	do func(ctx context.Context, i int, w fleet.Worker) *coordinatorv1.WorkerResult,
) []*coordinatorv1.WorkerResult {
	results := make([]*coordinatorv1.WorkerResult, len(workers))
	slots := make(chan struct{}, concurrency)
	var wg sync.WaitGroup
	for i, w := range workers {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			results[i] = &coordinatorv1.WorkerResult{Worker: workerPB(w), Error: "not called: " + context.Cause(ctx).Error(), Latency: durationpb.New(0)}
			continue
		}
		wg.Go(func() {
			defer func() { <-slots }()
			wctx, cancel := context.WithTimeoutCause(ctx, timeout, fmt.Errorf("no answer within %s", timeout))
			defer cancel()
			wctx, span := tracer.Start(wctx, "control "+name+" "+w.ID, trace.WithSpanKind(trace.SpanKindClient),
				trace.WithAttributes(attribute.String("coordinator.worker.id", w.ID), attribute.String("coordinator.worker.role", string(w.Role)),
					attribute.String("server.address", w.Address)))
			res := do(wctx, i, w)
			span.SetAttributes(attribute.Int("http.response.status_code", int(res.GetHttpStatus())))
			if !res.GetOk() {
				span.SetStatus(otelcodes.Error, res.GetError())
			}
			span.End()
			results[i] = res
		})
	}
	wg.Wait()
	return results
}
