// Command coordinator-sim runs the embedded simulator: a simulated Inference
// Gateway (encode, prefill and decode vLLM worker pools behind one address,
// dispatched on EPP-Profile) and a simulated render service, so the
// coordinator runs end to end with no GPU. `make run` starts it next to the
// coordinator.
//
//	coordinator-sim --gateway-addr 127.0.0.1:8200 --render-addr 127.0.0.1:8300 \
//	  --ttft 0 --token-delay 20ms --output-tokens 32 --models sim-model --strict=true \
//	  --prompt-tokens-details=false --prefill-engines 2 --decode-engines 2 \
//	  --engine-listen 127.0.0.1:0 --engines-file /tmp/engines.json
//
// Every engine (one per role by default) serves vLLM's control routes
// (/pause, /resume, /update_weight_version, ...) and its inference routes
// on its own --engine-listen address; --engines-file receives the list as
// JSON, [{"id":"decode-0","role":"decode","address":"127.0.0.1:41234"}].
//
// It stops cleanly on SIGINT or SIGTERM.
package main

import (
	"context"
	"encoding/json"
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

// flags are the parsed command line.
type flags struct {
	gatewayAddr, renderAddr string
	engineListen            string
	enginesFile             string
	opts                    sim.Options
}

// parseFlags parses args into flags, writing usage and errors to out.
func parseFlags(args []string, out io.Writer) (*flags, error) {
	fs := flag.NewFlagSet("coordinator-sim", flag.ContinueOnError)
	fs.SetOutput(out)
	f := &flags{}
	fs.StringVar(&f.gatewayAddr, "gateway-addr", "127.0.0.1:8200", "listen address of the simulated Inference Gateway")
	fs.StringVar(&f.renderAddr, "render-addr", "127.0.0.1:8300", "listen address of the simulated render service")
	fs.StringVar(&f.engineListen, "engine-listen", "127.0.0.1:0", "listen address of the engines' control routes: port 0 gives each a free port, port p gives them p, p+1, ...; empty: not served")
	fs.StringVar(&f.enginesFile, "engines-file", "", "write the engines as a JSON list of {id, role, address} to this file once they listen")
	ttft := fs.Duration("ttft", 0, "delay before the first decoded token")
	tokenDelay := fs.Duration("token-delay", 20*time.Millisecond, "delay between streamed tokens")
	outputTokens := fs.Int("output-tokens", 32, "tokens generated when a request sets no max_tokens")
	models := fs.String("models", sim.DefaultModel, "comma-separated served model names")
	strict := fs.Bool("strict", true, "reject legs that break the coordinator's wire contract")
	details := fs.Bool("prompt-tokens-details", false, "report usage.prompt_tokens_details.cached_tokens, like vLLM's --enable-prompt-tokens-details")
	engines := &f.opts.Engines
	fs.IntVar(&engines.Encode, "encode-engines", 1, "encode engines behind the gateway")
	fs.IntVar(&engines.Prefill, "prefill-engines", 1, "prefill engines behind the gateway")
	fs.IntVar(&engines.Decode, "decode-engines", 1, "decode engines behind the gateway")
	fs.IntVar(&f.opts.WorldSize, "world-size", 1, "world size every engine reports on GET /get_world_size")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	names, err := parseModels(*models)
	if err != nil {
		return nil, err
	}
	if *outputTokens < 1 {
		return nil, fmt.Errorf("--output-tokens must be at least 1, got %d", *outputTokens)
	}
	if *ttft < 0 || *tokenDelay < 0 {
		return nil, errors.New("--ttft and --token-delay must not be negative")
	}
	if min(engines.Encode, engines.Prefill, engines.Decode, f.opts.WorldSize) < 1 {
		return nil, errors.New("--encode-engines, --prefill-engines, --decode-engines and --world-size must be at least 1")
	}
	f.opts.Models, f.opts.TTFT, f.opts.TokenDelay, f.opts.OutputTokens = names, *ttft, *tokenDelay, *outputTokens
	f.opts.Strict, f.opts.PromptTokensDetails = *strict, *details
	f.opts.MaxLegs = -1 // nobody reads the leg log of a standalone simulator
	return f, nil
}

// run parses args, serves until ctx ends and logs to logOut.
func run(ctx context.Context, args []string, logOut io.Writer) error {
	f, err := parseFlags(args, logOut)
	if err != nil {
		return err
	}
	s := sim.New(f.opts)
	var lc net.ListenConfig
	gl, err := lc.Listen(ctx, "tcp", f.gatewayAddr)
	if err != nil {
		return fmt.Errorf("listen gateway: %w", err)
	}
	rl, err := lc.Listen(ctx, "tcp", f.renderAddr)
	if err != nil {
		_ = gl.Close()
		return fmt.Errorf("listen render: %w", err)
	}
	if err := serveEngines(ctx, s, f); err != nil {
		_, _ = gl.Close(), rl.Close()
		return err
	}
	defer s.CloseEngines()
	o := f.opts
	log := slog.New(slog.NewTextHandler(logOut, nil))
	log.Info("coordinator-sim serving",
		"gateway", gl.Addr().String(), "render", rl.Addr().String(),
		"models", strings.Join(o.Models, ","), "strict", o.Strict, "prompt_tokens_details", o.PromptTokensDetails,
		"ttft", o.TTFT, "token_delay", o.TokenDelay, "output_tokens", o.OutputTokens, "engines", engineList(s))
	if err := s.Serve(ctx, gl, rl); err != nil {
		return err
	}
	log.Info("coordinator-sim stopped")
	return nil
}

// serveEngines gives the engines their listeners (unless --engine-listen
// is empty) and writes --engines-file.
func serveEngines(ctx context.Context, s *sim.Sim, f *flags) error {
	if f.engineListen == "" {
		return nil
	}
	if err := s.ListenEngines(ctx, f.engineListen); err != nil {
		return err
	}
	if f.enginesFile == "" {
		return nil
	}
	if err := writeEnginesFile(f.enginesFile, s.Engines()); err != nil {
		s.CloseEngines()
		return err
	}
	return nil
}

// writeEnginesFile writes the engines as JSON, replacing path at once so
// a reader never sees half a file.
func writeEnginesFile(path string, engines []sim.Engine) error {
	body, err := json.MarshalIndent(engines, "", "  ")
	if err != nil {
		return fmt.Errorf("engines file: %w", err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(body, '\n'), 0o644); err != nil {
		return fmt.Errorf("engines file: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("engines file: %w", err)
	}
	return nil
}

// engineList is "id=address" per engine, comma-separated.
func engineList(s *sim.Sim) string {
	var parts []string
	for _, e := range s.Engines() {
		if e.Addr != "" {
			parts = append(parts, e.ID+"="+e.Addr)
		}
	}
	return strings.Join(parts, ",")
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
