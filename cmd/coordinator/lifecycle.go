package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

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

// errStopFailed is run's error when stopping failed: run logged why.
var errStopFailed = errors.New("stop failed")

// run starts app, logs one line when it serves, waits for a signal, stops
// it and logs one line when it stopped. A start failure is returned as the
// hook gave it ("server.listen_addr: listen tcp ...: address already in
// use"), for main to print whatever the log level. A stop failure, once
// every line is log's, is logged at error, and run returns errStopFailed.
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
		log.Error("coordinator stop failed", "signal", sig.Signal.String(), "drained", life.drained, "error", err.Error())
		return errStopFailed
	}
	log.Info("coordinator stopped", "signal", sig.Signal.String(), "drained", life.drained, "duration", time.Since(began))
	return nil
}
