package procs

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// Main runs a tool's run function on the command line's arguments, with a
// context that SIGINT or SIGTERM cancels, and exits: 2 for bad flags (the
// flag package printed why), 1 with the error after name on stderr for a
// failure ("interrupted" when a signal ended the run), 0 otherwise. It
// stops every process started by run's deferred calls first, as run has
// returned.
func Main(name string, run func(ctx context.Context, args []string, stdout, stderr io.Writer) error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	if err != nil && ctx.Err() != nil {
		err = errors.New("interrupted")
	}
	stop()
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, name+":", err)
		os.Exit(1)
	}
}
