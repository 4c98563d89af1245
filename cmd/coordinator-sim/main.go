// Command coordinator-sim runs the embedded simulator: a simulated Inference
// Gateway (encode, prefill and decode vLLM worker pools behind one address,
// dispatched on EPP-Profile) and a simulated render service, so the
// coordinator runs end to end with no GPU. `make run` starts it next to the
// coordinator.
//
//	coordinator-sim --gateway-addr 127.0.0.1:8200 --render-addr 127.0.0.1:8300 \
//	  --ttft 0 --token-delay 20ms --output-tokens 32 --models sim-model --strict=true \
//	  --prompt-tokens-details=false
//
// It stops cleanly on SIGINT or SIGTERM.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/coordinator-project/coordinator/sim"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "coordinator-sim:", err)
		}
		stop()
		os.Exit(2)
	}
}

// run parses args, serves until ctx ends and logs to logOut.
func run(ctx context.Context, args []string, logOut io.Writer) error {
	fs := flag.NewFlagSet("coordinator-sim", flag.ContinueOnError)
	fs.SetOutput(logOut)
	gatewayAddr := fs.String("gateway-addr", "127.0.0.1:8200", "listen address of the simulated Inference Gateway")
	renderAddr := fs.String("render-addr", "127.0.0.1:8300", "listen address of the simulated render service")
	ttft := fs.Duration("ttft", 0, "delay before the first decoded token")
	tokenDelay := fs.Duration("token-delay", 20*time.Millisecond, "delay between streamed tokens")
	outputTokens := fs.Int("output-tokens", 32, "tokens generated when a request sets no max_tokens")
	models := fs.String("models", sim.DefaultModel, "comma-separated served model names")
	strict := fs.Bool("strict", true, "reject legs that break the coordinator's wire contract")
	details := fs.Bool("prompt-tokens-details", false, "report usage.prompt_tokens_details.cached_tokens, like vLLM's --enable-prompt-tokens-details")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	names, err := parseModels(*models)
	if err != nil {
		return err
	}
	if *outputTokens < 1 {
		return fmt.Errorf("--output-tokens must be at least 1, got %d", *outputTokens)
	}
	if *ttft < 0 || *tokenDelay < 0 {
		return errors.New("--ttft and --token-delay must not be negative")
	}

	s := sim.New(sim.Options{
		Models:       names,
		TTFT:         *ttft,
		TokenDelay:   *tokenDelay,
		OutputTokens: *outputTokens,
		Strict:       *strict,
		MaxLegs:      -1, // nobody reads the leg log of a standalone simulator

		PromptTokensDetails: *details,
	})
	var lc net.ListenConfig
	gl, err := lc.Listen(ctx, "tcp", *gatewayAddr)
	if err != nil {
		return fmt.Errorf("listen gateway: %w", err)
	}
	rl, err := lc.Listen(ctx, "tcp", *renderAddr)
	if err != nil {
		_ = gl.Close()
		return fmt.Errorf("listen render: %w", err)
	}
	log := slog.New(slog.NewTextHandler(logOut, nil))
	log.Info("coordinator-sim serving",
		"gateway", gl.Addr().String(), "render", rl.Addr().String(),
		"models", strings.Join(names, ","), "strict", *strict, "prompt_tokens_details", *details,
		"ttft", *ttft, "token_delay", *tokenDelay, "output_tokens", *outputTokens)
	if err := s.Serve(ctx, gl, rl); err != nil {
		return err
	}
	log.Info("coordinator-sim stopped")
	return nil
}

// parseModels splits a comma list of model names.
func parseModels(list string) ([]string, error) {
	var names []string
	for name := range strings.SplitSeq(list, ",") {
		if name = strings.TrimSpace(name); name != "" {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return nil, errors.New("--models must name at least one model")
	}
	return names, nil
}
