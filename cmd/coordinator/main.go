// Command coordinator serves OpenAI-compatible REST and the gRPC
// CoordinatorService, driving each request through the configured pipeline
// of steps across the worker pools behind the Inference Gateway.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"

	"go.uber.org/dig"
	"go.uber.org/fx"
	"go.uber.org/fx/fxevent"

	"github.com/coordinator-project/coordinator/connectors/ec"
	"github.com/coordinator-project/coordinator/connectors/kv"
	"github.com/coordinator-project/coordinator/service"
	"github.com/coordinator-project/coordinator/service/admission"
	"github.com/coordinator-project/coordinator/service/config"
	"github.com/coordinator-project/coordinator/service/control"
	"github.com/coordinator-project/coordinator/service/logging"
	"github.com/coordinator-project/coordinator/service/rest"
	"github.com/coordinator-project/coordinator/service/tracing"
	"github.com/coordinator-project/coordinator/steps/asyncbroker"
	"github.com/coordinator-project/coordinator/steps/builtin"
)

// defaultGCPercent trades memory for CPU: the coordinator's heap is mostly
// short-lived request buffers, and collecting it at GOGC=100 costs a tenth
// of its CPU under load. GOGC in the environment still wins.
const defaultGCPercent = 200

// main exits 2 for bad flags, 1 when the config, the app's construction
// or its start fails (one "coordinator: ..." line on stderr with the
// cause, whatever the log level) or its stop fails (logged at error), 0
// after a clean stop.
func main() {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(defaultGCPercent)
	}
	flags := flag.NewFlagSet("coordinator", flag.ContinueOnError)
	configPath := flags.String("config", "config/coordinator/coordinator.yaml", "path of the YAML config file")
	verbosity := flags.Int("v", 0, "log verbosity 1 (warning) to 5 (trace); overrides log_level")
	if err := flags.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	cfg, err := config.Load(*configPath, os.LookupEnv)
	if err != nil {
		fail(err)
	}
	if *verbosity > 0 {
		cfg.LogLevel = *verbosity
	}
	log := logging.NewLogger(os.Stderr, cfg.LogLevel)
	routeLibraryLogs(log)
	var life *lifeReport
	app := fx.New(App(cfg, log), fx.Populate(&life))
	if err := app.Err(); err != nil {
		// The constructor's own error ("server.tls.cert_file: open ..."),
		// without fx's chain of the types it was building.
		fail(dig.RootCause(err))
	}
	if err := run(app, life, log); errors.Is(err, errStopFailed) {
		os.Exit(1)
	} else if err != nil {
		fail(err)
	}
}

// fail prints the cause of a failed start or stop and exits 1.
func fail(err error) {
	fmt.Fprintf(os.Stderr, "coordinator: %v\n", err)
	os.Exit(1)
}

// stopGrace is what stopping may take past server.shutdown_timeout: the
// calls the drain cancelled, each listener and the pipeline's resources get
// admission.StopGrace each.
const stopGrace = 4 * admission.StopGrace

// App is the whole coordinator for cfg: every module, and readiness that
// turns on once both listeners serve. At stop (fx runs the stop hooks in
// reverse order, so this one first) readiness turns off, then the
// Admission drain refuses new inference calls and waits for those in
// flight for up to server.shutdown_timeout before it cancels the rest;
// only then do the listeners close (rest, then service). fx's stop timeout
// leaves stopGrace past the drain.
func App(cfg config.Config, log *slog.Logger) fx.Option {
	fxLog := fx.NopLogger
	if cfg.LogLevel >= 4 {
		fxLog = fx.WithLogger(func() fxevent.Logger { return &fxevent.SlogLogger{Logger: log} })
	}
	return fx.Options(
		fx.Supply(cfg, log),
		fxLog,
		fx.StopTimeout(cfg.Server.ShutdownTimeout+stopGrace),
		kv.Module,
		ec.Module,
		builtin.Module,
		asyncbroker.Module,
		admission.Module,
		tracing.Module,
		service.Module,
		rest.Module,
		control.Module,
		fx.Provide(newLifeReport),
		fx.Invoke(func(lc fx.Lifecycle, ready *admission.Readiness, adm *admission.Controller, life *lifeReport) {
			lc.Append(fx.Hook{
				OnStart: func(context.Context) error { ready.Set(true); return nil },
				OnStop: func(ctx context.Context) error {
					life.drained, _ = adm.InFlight() // before /readyz says 503
					ready.Set(false)
					return adm.Drain(ctx)
				},
			})
		}),
	)
}
