package sim

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseFaults(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		values  []string
		want    faultSet
		wantErr string
	}{
		{name: "absent"},
		{name: "status", values: []string{"decode=status:503"}, want: faultSet{"decode": {kind: faultStatus, status: 503}}},
		{name: "list and spaces", values: []string{" Prefill = status:500 , encode=hang,"},
			want: faultSet{"prefill": {kind: faultStatus, status: 500}, "encode": {kind: faultHang}}},
		{name: "several values", values: []string{"render=status:429", "conditional=reset-mid-stream"},
			want: faultSet{"render": {kind: faultStatus, status: 429}, "conditional": {kind: faultReset}}},
		{name: "new kinds", values: []string{"decode=hang-mid-stream, prefill=close, encode=status-once:503"},
			want: faultSet{"decode": {kind: faultHangMid}, "prefill": {kind: faultClose}, "encode": {kind: faultStatus, status: 503, times: 1}}},
		{name: "limited to the first legs", values: []string{"decode=status:502/2, render=close/1, encode=HANG-MID-STREAM/3"},
			want: faultSet{"decode": {kind: faultStatus, status: 502, times: 2}, "render": {kind: faultClose, times: 1}, "encode": {kind: faultHangMid, times: 3}}},
		{name: "no kv params", values: []string{"prefill=no-kv-params, decode=no-kv-params/1"},
			want: faultSet{"prefill": {kind: faultNoKV}, "decode": {kind: faultNoKV, times: 1}}},
		{name: "limit of zero", values: []string{"decode=close/0"}, wantErr: `sim: invalid X-Sim-Fault fault "close/0"`},
		{name: "limit not a number", values: []string{"decode=close/x"}, wantErr: `sim: invalid X-Sim-Fault fault "close/x"`},
		{name: "once with a limit", values: []string{"decode=status-once:503/2"}, wantErr: `sim: invalid X-Sim-Fault fault "status-once:503/2"`},
		{name: "once out of range", values: []string{"decode=status-once:200"}, wantErr: `sim: invalid X-Sim-Fault fault "status-once:200"`},
		{name: "unknown target", values: []string{"gateway=hang"}, wantErr: `sim: invalid X-Sim-Fault entry "gateway=hang"`},
		{name: "no equals", values: []string{"decode"}, wantErr: `sim: invalid X-Sim-Fault entry "decode"`},
		{name: "unknown fault", values: []string{"decode=explode"}, wantErr: `sim: invalid X-Sim-Fault fault "explode"`},
		{name: "status not a number", values: []string{"decode=status:abc"}, wantErr: `sim: invalid X-Sim-Fault fault "status:abc"`},
		{name: "status out of range", values: []string{"decode=status:200"}, wantErr: `sim: invalid X-Sim-Fault fault "status:200"`},
		{name: "no HTTP status", values: []string{"decode=status:999"}, want: faultSet{"decode": {kind: faultStatus, status: 999}}},
		{name: "past three digits", values: []string{"decode=status:1000"}, wantErr: `sim: invalid X-Sim-Fault fault "status:1000"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := parseFaults(http.Header{FaultHeader: tc.values})
			if tc.wantErr != "" {
				require.NotNil(t, err)
				assert.Equal(t, http.StatusBadRequest, err.status)
				assert.True(t, strings.HasPrefix(err.message, tc.wantErr), err.message)
				return
			}
			require.Nil(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestFaultStatus(t *testing.T) {
	t.Parallel()
	const decodeBody = `{"messages":[]}`
	tests := []struct {
		name, fault, profile, prefer, path, body string
		render                                   bool
		wantStatus                               int
		wantType                                 string
	}{
		{name: "decode 503", fault: "decode=status:503", profile: "decode", path: pathChat, body: decodeBody,
			wantStatus: 503, wantType: "ServiceUnavailableError"},
		{name: "prefill 500", fault: "prefill=status:500", profile: "prefill", path: pathChat, body: prefillChatBody,
			wantStatus: 500, wantType: "InternalServerError"},
		{name: "encode 429", fault: "encode=status:429", profile: "encode", path: pathChat, body: `{}`,
			wantStatus: 429, wantType: "RateLimitError"},
		{name: "conditional 500", fault: "conditional=status:500", profile: "decode", prefer: "if-available", path: pathChat, body: decodeBody,
			wantStatus: 500, wantType: "InternalServerError"},
		{name: "render 422", fault: "render=status:422", render: true, path: pathChatRender, body: `{"messages":[]}`,
			wantStatus: 422, wantType: "UnprocessableEntityError"},
		{name: "decode fault spares conditional", fault: "decode=status:503", profile: "decode", prefer: "if-available", path: pathChat, body: decodeBody,
			wantStatus: 412, wantType: "PreconditionFailedError"},
		{name: "other profile untouched", fault: "prefill=status:500", profile: "decode", path: pathChat, body: decodeBody,
			wantStatus: 200},
		{name: "malformed header", fault: "decode=boom", profile: "decode", path: pathChat, body: decodeBody,
			wantStatus: 400, wantType: "BadRequestError"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := strictEnv(t)
			h := legHeader(tc.profile, "fault-1")
			h.Set(FaultHeader, tc.fault)
			if tc.prefer != "" {
				h.Set("Prefer", tc.prefer)
			}
			url := e.gateway.URL
			if tc.render {
				url = e.render.URL
			}
			resp := post(t, url+tc.path, h, tc.body)
			require.Equal(t, tc.wantStatus, resp.status, "body: %s", resp.body)
			if tc.wantType == "" {
				return
			}
			got := errorOf(t, resp.body)
			assert.Equal(t, tc.wantType, got.Type)
			assert.Equal(t, tc.wantStatus, got.Code)
		})
	}
}

func TestFaultStatusOnDirectWorker(t *testing.T) {
	t.Parallel()
	e := strictEnv(t)
	h := legHeader("", "")
	h.Set(FaultHeader, "decode=status:502")
	resp := post(t, e.worker.URL+pathChat, h, `{"messages":[]}`)
	require.Equal(t, http.StatusBadGateway, resp.status)
	assert.Equal(t, "sim: injected fault status:502", errorOf(t, resp.body).Message)
}

// Injected status answers carry X-Sim-Retry-After's value as Retry-After;
// every answer names its pool in X-Sim-Pool.
func TestFaultRetryAfterAndPoolHeader(t *testing.T) {
	t.Parallel()
	e := strictEnv(t)
	tests := []struct {
		name, url, profile, fault, retryAfter, pool, wantRetryAfter string
		status                                                      int
	}{
		{name: "decode 429", url: e.gateway.URL + pathChat, profile: "decode", fault: "decode=status:429", retryAfter: "7",
			pool: "decode", wantRetryAfter: "7", status: 429},
		{name: "prefill 503", url: e.gateway.URL + pathChat, profile: "prefill", fault: "prefill=status:503", retryAfter: "0",
			pool: "prefill", wantRetryAfter: "0", status: 503},
		{name: "no header, no Retry-After", url: e.gateway.URL + pathChat, profile: "decode", fault: "decode=status:429",
			pool: "decode", status: 429},
		{name: "a success", url: e.gateway.URL + pathChat, profile: "decode", retryAfter: "7", pool: "decode", status: 200},
		{name: "direct worker", url: e.worker.URL + pathChat, fault: "decode=status:429", retryAfter: "3",
			pool: "decode", wantRetryAfter: "3", status: 429},
		{name: "render", url: e.render.URL + pathChatRender, fault: "render=status:429", retryAfter: "2",
			pool: "render", wantRetryAfter: "2", status: 429},
		{name: "malformed", url: e.gateway.URL + pathChat, profile: "decode", retryAfter: "soon", pool: "decode", status: 400},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := legHeader(tc.profile, "retry-"+strconv.Itoa(i))
			if tc.fault != "" {
				h.Set(FaultHeader, tc.fault)
			}
			if tc.retryAfter != "" {
				h.Set(RetryAfterHeader, tc.retryAfter)
			}
			body := `{"model":"` + DefaultModel + `","messages":[]}`
			if tc.profile == "prefill" {
				body = prefillChatBody
			}
			resp := post(t, tc.url, h, body)
			require.Equal(t, tc.status, resp.status, "body: %s", resp.body)
			assert.Equal(t, tc.wantRetryAfter, resp.header.Get("Retry-After"))
			assert.Equal(t, tc.pool, resp.header.Get(PoolHeader))
		})
	}
}

func TestFaultHang(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, fault, profile, path string
		render                     bool
	}{
		{name: "decode", fault: "decode=hang", profile: "decode", path: pathChat},
		{name: "encode", fault: "encode=hang", profile: "encode", path: pathChat},
		{name: "render", fault: "render=hang", render: true, path: pathChatRender},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := New(Options{Strict: true})
			url, started, done := serveWatched(t, s, tc.render)

			ctx, cancel := context.WithCancel(t.Context())
			errc := make(chan error, 1)
			go func() {
				req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+tc.path, strings.NewReader(`{"messages":[]}`))
				if err == nil {
					req.Header = legHeader(tc.profile, "hang-1")
					req.Header.Set(FaultHeader, tc.fault)
					var resp *http.Response
					if resp, err = http.DefaultClient.Do(req); err == nil {
						resp.Body.Close()
					}
				}
				errc <- err
			}()
			waitClosed(t, started, "start")
			cancel()
			waitClosed(t, done, tc.name)
			assert.ErrorIs(t, <-errc, context.Canceled)
			legs := s.Legs()
			require.Len(t, legs, 1)
			assert.Zero(t, legs[0].Status, "a hung leg never answered")
		})
	}
}

func TestFaultResetMidStream(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, Options{Strict: true, OutputTokens: 8})
	tests := []struct {
		name, path, body string
		stream           bool
	}{
		{name: "stream", path: pathChat, body: `{"messages":[],"stream":true}`, stream: true},
		{name: "json", path: pathChat, body: `{"messages":[]}`},
		{name: "generate stream", path: pathGenerate, body: `{"token_ids":[1],"sampling_params":{},"stream":true}`, stream: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, e.gateway.URL+tc.path, strings.NewReader(tc.body))
			require.NoError(t, err)
			req.Header = legHeader("decode", "reset-1")
			req.Header.Set(FaultHeader, "decode=reset-mid-stream")
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			require.Equal(t, http.StatusOK, resp.StatusCode)
			br := bufio.NewReader(resp.Body)
			if tc.stream {
				line, err := br.ReadString('\n')
				require.NoError(t, err)
				assert.True(t, strings.HasPrefix(line, "data: {"), line)
			}
			_, err = io.ReadAll(br)
			assert.ErrorIs(t, err, io.ErrUnexpectedEOF, "the connection is cut before the end")
		})
	}
}

// TestFaultClose: the connection is closed before any answer, on every
// target; the leg is recorded without a status.
func TestFaultClose(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, fault, profile, path, body string
		render                           bool
	}{
		{name: "decode", fault: "decode=close", profile: "decode", path: pathChat, body: `{"messages":[]}`},
		{name: "prefill", fault: "prefill=close", profile: "prefill", path: pathChat, body: prefillChatBody},
		{name: "encode", fault: "encode=close", profile: "encode", path: pathChat, body: `{}`},
		{name: "render", fault: "render=close", render: true, path: pathChatRender, body: `{"messages":[]}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := strictEnv(t)
			url := e.gateway.URL
			if tc.render {
				url = e.render.URL
			}
			req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url+tc.path, strings.NewReader(tc.body))
			require.NoError(t, err)
			req.Header = legHeader(tc.profile, "close-1")
			req.Header.Set(FaultHeader, tc.fault)
			resp, err := http.DefaultClient.Do(req)
			if err == nil {
				resp.Body.Close()
			}
			require.Error(t, err, "no answer at all")
			assert.ErrorIs(t, err, io.EOF)
			legs := e.sim.Legs()
			require.Len(t, legs, 1)
			assert.Zero(t, legs[0].Status)
		})
	}
}

// TestFaultHangMidStream: the headers and the first token (or half the
// JSON body) arrive, then nothing until the client goes away.
func TestFaultHangMidStream(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, fault, profile, path, body string
		render, stream                   bool
	}{
		{name: "decode stream", fault: "decode=hang-mid-stream", profile: "decode", path: pathChat, body: `{"messages":[],"stream":true}`, stream: true},
		{name: "decode JSON", fault: "decode=hang-mid-stream", profile: "decode", path: pathChat, body: `{"messages":[]}`},
		{name: "prefill", fault: "prefill=hang-mid-stream", profile: "prefill", path: pathChat, body: prefillChatBody},
		{name: "encode", fault: "encode=hang-mid-stream", profile: "encode", path: pathChat, body: `{"messages":[]}`},
		{name: "render", fault: "render=hang-mid-stream", render: true, path: pathChatRender, body: `{"messages":[]}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			url, _, done := serveWatched(t, New(Options{OutputTokens: 4}), tc.render)

			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+tc.path, strings.NewReader(tc.body))
			require.NoError(t, err)
			req.Header = legHeader(tc.profile, "hang-mid-1")
			req.Header.Set(FaultHeader, tc.fault)
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			require.Equal(t, http.StatusOK, resp.StatusCode)
			if tc.stream {
				line, err := bufio.NewReader(resp.Body).ReadString('\n')
				require.NoError(t, err)
				assert.True(t, strings.HasPrefix(line, "data: {"), line)
			} else {
				half := make([]byte, resp.ContentLength/2)
				_, err := io.ReadFull(resp.Body, half)
				require.NoError(t, err, "half the body arrives")
			}
			select {
			case <-done:
				t.Fatal("the handler ended before the client went away")
			default:
			}
			cancel()
			waitClosed(t, done, tc.name)
		})
	}
}

// TestFaultLimitedToFirstLegs: a fault with /<n> (or status-once) hits the
// first n legs of a request and target, then the leg is served; each
// request and target has its own count.
func TestFaultLimitedToFirstLegs(t *testing.T) {
	t.Parallel()
	e := strictEnv(t)
	send := func(requestID, fault string) (int, error) {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, e.gateway.URL+pathChat, strings.NewReader(prefillChatBody))
		require.NoError(t, err)
		req.Header = legHeader("prefill", requestID)
		req.Header.Set(FaultHeader, fault)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, nil
	}
	statuses := func(requestID, fault string, n int) []int {
		var got []int
		for range n {
			code, err := send(requestID, fault)
			if err != nil {
				code = 0
			}
			got = append(got, code)
		}
		return got
	}
	assert.Equal(t, []int{503, 200, 200}, statuses("once-1", "prefill=status-once:503", 3))
	assert.Equal(t, []int{502, 502, 200}, statuses("twice-1", "prefill=status:502/2", 3))
	assert.Equal(t, []int{0, 200}, statuses("close-1", "prefill=close/1", 2), "closed, then served")
	assert.Equal(t, []int{503, 200}, statuses("once-2", "prefill=status-once:503", 2), "another request has its own count")
	assert.Equal(t, []int{200}, statuses("once-1", "prefill=status-once:503, decode=status-once:503", 1),
		"the count is per target: prefill's is used up")
	e.sim.Reset()
	assert.Equal(t, []int{503}, statuses("once-1", "prefill=status-once:503", 1), "Reset forgets the counts")
}

// serveWatched serves s's gateway, or its render service, on loopback until
// the test ends, and reports when its handler starts and when it ends.
func serveWatched(t *testing.T, s *Sim, render bool) (url string, started, done <-chan struct{}) {
	t.Helper()
	handler := s.Gateway()
	if render {
		handler = s.Render()
	}
	h, started, done := handlerDone(handler)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL, started, done
}

// TestFaultNoKVParams: with no-kv-params a prefill worker answers 200
// without kv_transfer_params (as the llm-d inference simulator answers a
// Messages prefill), and a decode leg without them is then no strict-mode
// violation; the fault does nothing to other legs.
func TestFaultNoKVParams(t *testing.T) {
	t.Parallel()
	e := strictEnv(t)
	send := func(profile, requestID, body string) (int, map[string]json.RawMessage) {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, e.gateway.URL+pathChat, strings.NewReader(body))
		require.NoError(t, err)
		req.Header = legHeader(profile, requestID)
		req.Header.Set(FaultHeader, "prefill=no-kv-params, decode=no-kv-params")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		var answer map[string]json.RawMessage
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&answer))
		return resp.StatusCode, answer
	}
	code, answer := send("prefill", "nokv-1", prefillChatBody)
	require.Equal(t, http.StatusOK, code, "%s", answer["error"])
	assert.NotContains(t, answer, "kv_transfer_params")
	assert.Contains(t, answer, "choices")

	code, answer = send("decode", "nokv-1", `{"model":"sim-model","max_tokens":2,"messages":[{"role":"user","content":"hi"}]}`)
	assert.Equal(t, http.StatusOK, code, "%s", answer["error"])
}
