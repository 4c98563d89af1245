package main

import (
	"bytes"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/internal/headers"
	"github.com/coordinator-project/coordinator/sim"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// goldenRoutingHeaders are the headers of a leg the coordinator sets for
// routing, in the order a golden lists them.
var goldenRoutingHeaders = []string{"EPP-Profile", "X-Data-Parallel-Rank", "X-Request-Id", "X-Session-Id", "X-Session-Token"}

// legSuffix is the random part of a leg's request id
// (headers.LegRequestID), wherever it shows: the x-request-id header and
// the KV hand-off's ids in the decode leg's kv_transfer_params.
var legSuffix = regexp.MustCompile(`-[0-9a-f]{16}\b`)

// goldenLeg renders a leg as a golden holds it: its method line, its
// routing headers (every value, as received), a blank line and its body
// as it went out, with the leg id's random suffix as "-RANDOM".
func goldenLeg(l sim.Leg) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "POST %s (engine %s)\n", l.Path, l.Engine)
	for _, name := range goldenRoutingHeaders {
		for _, v := range l.Header.Values(name) {
			fmt.Fprintf(&b, "%s: %s\n", name, v)
		}
	}
	b.WriteByte('\n')
	b.Write(l.Body)
	b.WriteString("\n\n")
	return legSuffix.ReplaceAll(b.Bytes(), []byte("-RANDOM"))
}

// goldenBytes compares got with testdata/<name> byte for byte; -update
// rewrites the file.
func goldenBytes(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, got, 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "missing golden file: run go test ./cmd/coordinator -run %s -update", t.Name())
	assert.Equal(t, string(want), string(got), "golden %s differs byte for byte (run with -update and review the diff)", name)
}

// TestSessionLegsGolden: three turns of one session over P/D (3 prefill
// and 3 decode engines, pipeline.dp_size 4) under both of the llm-d EPP's
// session strategies: every turn lands on one prefill and one decode
// engine, its prefill and decode legs carry one data-parallel rank, and
// the routing headers and bodies of every leg are the golden's, byte for
// byte. With session_id the client names the session (X-Session-Id), and
// the rank is the session's on every turn; with encoded_endpoint_header it
// sends back the x-session-token each answer gave (joined), each leg gets
// its own phase's, and the rank is each turn's request id's.
func TestSessionLegsGolden(t *testing.T) {
	t.Parallel()
	for strategy, name := range map[string]string{sim.SessionByID: "by-id", sim.SessionByToken: "by-token"} {
		t.Run(strategy, func(t *testing.T) {
			t.Parallel()
			s, gw, render := startSim(t, sim.Options{Strict: true, OutputTokens: 3, SessionAffinity: strategy,
				Engines: sim.EngineCounts{Prefill: 3, Decode: 3}})
			st := startStack(t, gw, render, pdPinned)
			const session = "agent-7"
			var golden []byte
			engines := map[string]map[string]bool{"prefill": {}, "decode": {}}
			token := ""
			for turn := range 3 {
				if turn > 0 { // another client's request between turns moves the round robin on
					other := st.post(t, "/v1/chat/completions", `{"model":"`+sim.DefaultModel+`","messages":[{"role":"user","content":"other"}]}`,
						http.Header{"X-Session-Id": {fmt.Sprintf("other-%d", turn)}})
					require.Equal(t, http.StatusOK, other.StatusCode, readAll(t, other.Body))
				}
				id := fmt.Sprintf("%s-turn-%d", name, turn)
				h := http.Header{"X-Request-Id": {id}}
				if strategy == sim.SessionByID {
					h.Set("X-Session-Id", session)
				} else if token != "" {
					h.Set("X-Session-Token", token)
				}
				body := `{"model":"` + sim.DefaultModel + `","max_tokens":3,"messages":[{"role":"user","content":"turn ` + fmt.Sprint(turn) + `"}]}`
				resp := st.post(t, "/v1/chat/completions", body, h)
				require.Equal(t, http.StatusOK, resp.StatusCode, readAll(t, resp.Body))
				token = resp.Header.Get("X-Session-Token")

				p, d := pdLegs(s, id, "prefill"), pdLegs(s, id, "decode")
				require.Len(t, p, 1, id)
				require.Len(t, d, 1, id)
				engines["prefill"][p[0].Engine], engines["decode"][d[0].Engine] = true, true
				rank := p[0].Header.Get("X-Data-Parallel-Rank")
				assert.Equal(t, []string{rank}, d[0].Header.Values("X-Data-Parallel-Rank"), "%s: one rank on both legs", id)
				want := headers.DPRank(id, 4)
				if strategy == sim.SessionByID {
					want = headers.DPRank(session, 4)
				}
				assert.Equal(t, want, rank, id)
				golden = append(golden, goldenLeg(p[0])...)
				golden = append(golden, goldenLeg(d[0])...)
			}
			assert.Len(t, engines["prefill"], 1, "every turn on one prefill engine: %v", engines["prefill"])
			assert.Len(t, engines["decode"], 1, "every turn on one decode engine: %v", engines["decode"])
			goldenBytes(t, "session_legs_"+name+".golden", golden)
		})
	}
}
