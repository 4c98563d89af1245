package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/coordinator-project/coordinator/cmd/internal/procs"
)

// The cascade scenarios compare two coordinators on one simulator started
// for them with its wire-contract checks on (--strict=true): the full
// cascade of config/dev.yaml and a decode-only one, sent the same kind of
// request. Direct and proxy targets would have no pipeline to compare.
//
// The simulator remembers every prompt its prefill and decode pools served
// and answers a conditional-decode leg (Prefer: if-available) for such a
// prompt, which ends the pipeline before encode and prefill. Every request
// therefore carries a prompt no other request of the run carries (the
// templates' nonces), and the tripwire proves it: every request sends
//
//	X-Sim-Fault: conditional=reset-mid-stream
//
// which the coordinator forwards to every leg and the simulator applies
// only when it answers a conditional leg from a remembered prompt (a miss
// is a plain 412: the reset fault acts on the answer's body, and a miss has
// none). A request answered from the conditional leg thus fails, and the
// bench stops at the first failed request: every measured cascade request
// ran encode (images), prefill and decode. The preflight checks the
// tripwire fires by sending one request twice, the second failing in
// conditional-decode by the cascade coordinator's log.

// simFaultHeader is the simulator's fault-injection header (sim.FaultHeader;
// the bench does not link the simulator).
const simFaultHeader = "X-Sim-Fault"

// conditionalTripwire fails any request the conditional leg answers.
const conditionalTripwire = "conditional=reset-mid-stream"

// Names of the cascade targets and their simulator's process.
const (
	cascadeName    = "cascade"
	decodeOnlyName = "decode-only"
	cascadeSimName = "sim-cascade"
)

// startCascade starts the strict simulator and the two coordinators of the
// cascade scenarios; the decode-only target comes first, the baseline.
func (f *fleet) startCascade(ctx context.Context, coordinatorBin, simBin string) ([]target, error) {
	sim, err := f.startSim(ctx, simBin, cascadeSimName, true)
	if err != nil {
		return nil, err
	}
	decode, err := f.startCoordinator(ctx, coordinatorBin, decodeOnlyName, sim, decodeOnly)
	if err != nil {
		return nil, err
	}
	cascade, err := f.startCoordinator(ctx, coordinatorBin, cascadeName, sim, cascadePipeline)
	if err != nil {
		return nil, err
	}
	return []target{decode, cascade}, nil
}

// preflights builds the template of each cascade scenario (into scs) and
// runs its preflight, stopping at the first failure.
func (l *loader) preflights(ctx context.Context, scs []scenario, targets []target, progress io.Writer) ([]preflight, error) {
	var out []preflight
	for i := range scs {
		sc := &scs[i]
		var err error
		if sc.template, err = sc.newTemplate(); err != nil {
			return out, fmt.Errorf("%s: %w", sc.name, err)
		}
		fmt.Fprintf(progress, "preflight %s...\n", sc.name)
		pf, err := l.preflight(ctx, *sc, targets)
		if err != nil {
			return out, fmt.Errorf("%s: %w", sc.name, err)
		}
		out = append(out, pf)
	}
	return out, nil
}

// preflight is what the checks before a cascade scenario found.
type preflight struct {
	Scenario     string `json:"scenario"`
	BodyBytes    int    `json:"body_bytes"`
	PromptTokens int    `json:"prompt_tokens"`      // usage.prompt_tokens of the cascade's answer
	RepeatStatus int    `json:"repeat_status"`      // the tripped repeat's status
	RepeatLog    string `json:"repeat_log"`         // the cascade coordinator's log line about it
	DecodeTokens int    `json:"decode_only_tokens"` // usage.prompt_tokens of decode-only's answer
}

// preflight checks a cascade scenario before it is measured, on targets
// (decode-only, cascade):
//
//  1. a fresh request through the cascade succeeds, with at least
//     sc.minPromptTokens prompt tokens;
//  2. the same request again fails, in conditional-decode by the
//     coordinator's log: the simulator now holds the prompt, so the
//     conditional leg hits and the tripwire breaks its answer. This proves
//     that the simulator remembers prompts and that an answer from the
//     conditional leg cannot pass for a success;
//  3. a fresh request through decode-only succeeds.
func (l *loader) preflight(ctx context.Context, sc scenario, targets []target) (preflight, error) {
	decode, cascade := targets[0], targets[1]
	body := sc.template.fill(nil, l.nonces.Add(1))
	pf := preflight{Scenario: sc.name, BodyBytes: len(body)}
	status, _, answer, err := l.post(ctx, cascade.base+sc.path, body)
	if err != nil || status != http.StatusOK {
		return pf, cascade.failed(answerError(status, answer, err))
	}
	if pf.PromptTokens, err = promptTokensOf(answer); err != nil {
		return pf, cascade.failed(fmt.Errorf("preflight: %w", err))
	}
	if pf.PromptTokens < sc.minPromptTokens {
		return pf, cascade.failed(fmt.Errorf("preflight: %d prompt tokens, want at least %d", pf.PromptTokens, sc.minPromptTokens))
	}
	status, id, _, err := l.post(ctx, cascade.base+sc.path, body)
	if err == nil && status == http.StatusOK {
		return pf, cascade.failed(errors.New("preflight: a repeated prompt succeeded: the conditional-decode tripwire does not fire, so requests answered without prefill could not be told apart"))
	}
	if err != nil {
		return pf, cascade.failed(fmt.Errorf("preflight: a repeated prompt: %w", err))
	}
	pf.RepeatStatus = status
	if pf.RepeatLog, err = logLine(ctx, cascade.hop, id, conditionalDecodeStep, 2*time.Second); err != nil {
		return pf, cascade.failed(fmt.Errorf("preflight: a repeated prompt failed with status %d, not by the tripwire: %w", status, err))
	}
	body = sc.template.fill(body, l.nonces.Add(1))
	status, _, answer, err = l.post(ctx, decode.base+sc.path, body)
	if err != nil || status != http.StatusOK {
		return pf, decode.failed(answerError(status, answer, err))
	}
	if pf.DecodeTokens, err = promptTokensOf(answer); err != nil {
		return pf, decode.failed(fmt.Errorf("preflight: %w", err))
	}
	return pf, nil
}

// post sends one cascade request (tripwire included) and reads the answer
// and the request id the coordinator gave it. A body cut short is an error,
// with the status.
func (l *loader) post(ctx context.Context, url string, body []byte) (status int, id string, answer []byte, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, "", nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(simFaultHeader, conditionalTripwire)
	resp, err := l.client.Do(req)
	if err != nil {
		return 0, "", nil, err
	}
	defer resp.Body.Close()
	answer, err = io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("X-Request-Id"), answer, err
}

// conditionalDecodeStep is the conditional-decode step's type, as the
// coordinator names it in its logs.
const conditionalDecodeStep = "conditional-decode"

// logLine waits up to wait for a line of p's log that holds both the
// request id and want, and returns it.
func logLine(ctx context.Context, p *procs.Process, id, want string, wait time.Duration) (string, error) {
	if id == "" {
		return "", errors.New("no X-Request-Id in the answer")
	}
	deadline := time.Now().Add(wait)
	for {
		raw, err := os.ReadFile(p.Log)
		if err != nil {
			return "", err
		}
		for line := range strings.Lines(string(raw)) {
			if strings.Contains(line, id) && strings.Contains(line, want) {
				return strings.TrimSpace(line), nil
			}
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("no line of the %s log names request %s and %s", p.Name, id, want)
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// answerError describes a failed preflight request.
func answerError(status int, answer []byte, err error) error {
	if err != nil {
		return fmt.Errorf("preflight: %w", err)
	}
	return fmt.Errorf("preflight: status %d: %s", status, snippet(answer))
}

// promptTokensOf reads usage.prompt_tokens from a completion.
func promptTokensOf(answer []byte) (int, error) {
	var c struct {
		Choices json.RawMessage `json:"choices"`
		Usage   *struct {
			PromptTokens int `json:"prompt_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(answer, &c); err != nil || c.Choices == nil || c.Usage == nil {
		return 0, fmt.Errorf("not a completion with usage: %s", snippet(answer))
	}
	return c.Usage.PromptTokens, nil
}

// snippet is the start of an answer, for messages.
func snippet(b []byte) string {
	b = bytes.TrimSpace(b)
	if len(b) > 300 {
		return string(b[:300]) + "..."
	}
	return string(b)
}
