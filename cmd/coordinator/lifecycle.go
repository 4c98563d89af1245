package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/fx"

	"github.com/coordinator-project/coordinator/service"
	"github.com/coordinator-project/coordinator/service/tracing"
	"github.com/coordinator-project/coordinator/steps"
)

// lifeReport is what the start and stop lines say.
type lifeReport struct {
	addrs    *service.Addresses
	pipeline *steps.Pipeline
	tracing  string
	// drained is the inference calls in flight when the drain began; set
	// by App's stop hook.
	drained int
}

func newLifeReport(addrs *service.Addresses, p *steps.Pipeline, t *tracing.Tracing) *lifeReport {
	return &lifeReport{addrs: addrs, pipeline: p, tracing: t.String()}
}

// run starts app, logs one line when it serves, waits for a signal, stops
// it and logs one line when it stopped. A start or stop failure is
// returned as the hook gave it ("server.listen_addr: listen tcp ...:
// address already in use"), for main to print whatever the log level.
func run(app *fx.App, life *lifeReport, log *slog.Logger) error {
	startCtx, cancel := context.WithTimeout(context.Background(), app.StartTimeout())
	defer cancel()
	began := time.Now()
	done := app.Wait() // listens for SIGINT and SIGTERM from now on
	if err := app.Start(startCtx); err != nil {
		return fmt.Errorf("start: %w", err)
	}
	log.Info("coordinator started",
		"rest", life.addrs.REST(), "grpc", life.addrs.GRPC(),
		"pipeline", strings.Join(life.pipeline.Names(), ","), "tracing", life.tracing,
		"duration", time.Since(began))

	sig := <-done
	stopCtx, cancel := context.WithTimeout(context.Background(), app.StopTimeout())
	defer cancel()
	began = time.Now()
	if err := app.Stop(stopCtx); err != nil {
		return fmt.Errorf("stop (%s, %d requests in flight at the signal): %w", sig.Signal, life.drained, err)
	}
	log.Info("coordinator stopped", "signal", sig.Signal.String(), "drained", life.drained, "duration", time.Since(began))
	return nil
}

// routeLibraryLogs sends what libraries print on their own through log:
// go-redis's connection pool complaints (a Redis that is down at start
// says so once, in the start failure) become debug lines.
func routeLibraryLogs(log *slog.Logger) {
	redis.SetLogger(redisLog{log})
}

// redisLog is go-redis's logger interface over slog.
type redisLog struct{ log *slog.Logger }

func (l redisLog) Printf(ctx context.Context, format string, v ...any) {
	l.log.DebugContext(ctx, "redis: "+fmt.Sprintf(format, v...))
}
