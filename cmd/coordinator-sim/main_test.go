package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var servingLine = regexp.MustCompile(`msg="coordinator-sim serving" gateway=(\S+) render=(\S+) models=(\S+) strict=(\S+) prompt_tokens_details=(\S+)`)

func TestRunServesUntilCancelled(t *testing.T) {
	t.Parallel()
	pr, pw := io.Pipe()
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		err := run(ctx, []string{
			"--gateway-addr", "127.0.0.1:0", "--render-addr", "127.0.0.1:0",
			"--token-delay", "0", "--output-tokens", "2", "--models", "a, b", "--strict=false",
			"--prompt-tokens-details",
		}, pw)
		_ = pw.CloseWithError(io.EOF)
		errc <- err
	}()
	lines := bufio.NewScanner(pr)
	require.True(t, lines.Scan(), "startup line")
	m := servingLine.FindStringSubmatch(lines.Text())
	require.NotNil(t, m, lines.Text())
	assert.Equal(t, "a,b", m[3])
	assert.Equal(t, "false", m[4])
	assert.Equal(t, "true", m[5])

	resp, err := http.Post("http://"+m[1]+"/v1/completions", "application/json", strings.NewReader(`{"model":"b","prompt":"hi"}`))
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Contains(t, string(body), `"text":"This answer"`)
	assert.Contains(t, string(body), `"prompt_tokens_details":{"cached_tokens":0}`)

	resp, err = http.Post("http://"+m[2]+"/v1/completions/render", "application/json", strings.NewReader(`{"prompt":"hello world"}`))
	require.NoError(t, err)
	body, err = io.ReadAll(resp.Body)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Contains(t, string(body), `"token_ids":[15339,1917]`)

	cancel()
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	require.NoError(t, <-errc)
	http.DefaultClient.CloseIdleConnections()
}

func TestRunRejectsBadFlags(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{name: "unknown flag", args: []string{"--nope"}, wantErr: "flag provided but not defined"},
		{name: "positional", args: []string{"extra"}, wantErr: "unexpected arguments: extra"},
		{name: "no models", args: []string{"--models", " , "}, wantErr: "--models must name at least one model"},
		{name: "output tokens", args: []string{"--output-tokens", "0"}, wantErr: "--output-tokens must be at least 1"},
		{name: "negative delay", args: []string{"--token-delay", "-1s"}, wantErr: "must not be negative"},
		{name: "bad address", args: []string{"--gateway-addr", "127.0.0.1:-1"}, wantErr: "listen gateway"},
		{name: "no engines", args: []string{"--decode-engines", "0"}, wantErr: "must be at least 1"},
		{name: "world size", args: []string{"--world-size", "0"}, wantErr: "must be at least 1"},
		{name: "bad engine address", args: []string{"--gateway-addr", "127.0.0.1:0", "--render-addr", "127.0.0.1:0",
			"--engine-listen", "127.0.0.1"}, wantErr: "sim: engine address"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := run(t.Context(), tc.args, io.Discard)
			assert.ErrorContains(t, err, tc.wantErr)
		})
	}
}

func TestRunWritesEnginesFile(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "engines.json")
	pr, pw := io.Pipe()
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		err := run(ctx, []string{
			"--gateway-addr", "127.0.0.1:0", "--render-addr", "127.0.0.1:0", "--token-delay", "0",
			"--prefill-engines", "2", "--decode-engines", "2", "--world-size", "8",
			"--engine-listen", "127.0.0.1:0", "--engines-file", file,
		}, pw)
		_ = pw.CloseWithError(io.EOF)
		errc <- err
	}()
	lines := bufio.NewScanner(pr)
	require.True(t, lines.Scan(), "startup line")
	require.Contains(t, lines.Text(), `engines="encode-0=127.0.0.1:`)
	go func() { _, _ = io.Copy(io.Discard, pr) }()

	body, err := os.ReadFile(file)
	require.NoError(t, err, "the file is written before the startup line")
	var engines []struct{ ID, Role, Address string }
	require.NoError(t, json.Unmarshal(body, &engines))
	var ids []string
	for _, e := range engines {
		ids = append(ids, e.ID)
		assert.True(t, strings.HasPrefix(e.ID, e.Role+"-"), e.ID)
		resp, err := http.Get("http://" + e.Address + "/get_world_size")
		require.NoError(t, err, e.ID)
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		resp.Body.Close()
		assert.JSONEq(t, `{"world_size":8}`, string(b), e.ID)
	}
	assert.Equal(t, []string{"encode-0", "prefill-0", "prefill-1", "decode-0", "decode-1"}, ids)

	cancel()
	require.NoError(t, <-errc)
	http.DefaultClient.CloseIdleConnections()
	_, err = http.Get("http://" + engines[0].Address + "/is_paused")
	assert.Error(t, err, "the engines stop with the simulator")
}
