package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/sim"
)

// The memory harness (issue 34's done-when): the real coordinator binary,
// under the Helm chart's GOMEMLIMIT, facing one hostile vector at a time
// while an ordinary client keeps asking. Each vector asserts that (1) each
// hostile request gets its error within a few seconds of its last byte,
// (2) the ordinary requests sent meanwhile are served, (3) the process's
// peak RSS (VmHWM) stays under the chart's 2 GiB memory limit.
const (
	// chartMemLimit is the Helm chart's GOMEMLIMIT, and chartMemory its
	// container memory limit.
	chartMemLimit = "1800MiB"
	chartMemory   = 2 << 30
	// answerBound is how long after its last byte a hostile request may
	// wait for its error: 1 s on an idle machine, room for a loaded CI box.
	answerBound = 5 * time.Second
	// hugeModel marks a request the fake gateway answers with a huge body.
	hugeModel = "huge-answer"
	// answerCapMiB is the harness's gateway.max_answer_size.
	answerCapMiB = 32
)

// TestMemoryUnderHostileClients runs the binary under the chart's
// GOMEMLIMIT against the hostile vectors of issue 34. The fourth, 8
// requests of 64 image URLs of 10 MB, is TestReplaceMediaURLsMemoryUnderConcurrentRequests
// (steps), in process: the binary's SSRF guard refuses a loopback origin,
// by design, and no config lets it.
func TestMemoryUnderHostileClients(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t.Parallel()
	gw := httptest.NewServer(hugeAnswers(sim.New(sim.Options{}).Gateway(), 2<<30))
	t.Cleanup(gw.Close)
	c := startCoordinator(t, gw.URL)

	t.Run("4 concurrent 2 GiB decode answers", func(t *testing.T) {
		c.hostile(t, 4, func() (int, time.Duration) {
			body := `{"model":"` + hugeModel + `","messages":[{"role":"user","content":"hi"}]}`
			start := time.Now()
			resp, err := http.Post(c.url+"/v1/chat/completions", "application/json", strings.NewReader(body))
			if err != nil {
				return 0, time.Since(start)
			}
			defer resp.Body.Close()
			_, _ = io.Copy(io.Discard, resp.Body)
			return resp.StatusCode, time.Since(start)
		})
	})
	t.Run("one h2c connection, 100 streams of 1 byte declaring 64 MiB", func(t *testing.T) {
		h2c := h2cClient()
		defer h2c.CloseIdleConnections()
		c.hostile(t, 100, func() (int, time.Duration) {
			r := &oneByteThenWait{release: make(chan struct{})}
			req, err := http.NewRequest(http.MethodPost, c.url+"/v1/chat/completions", r)
			if err != nil {
				return 0, 0
			}
			req.ContentLength = 64 << 20
			resp, err := h2c.Do(req)
			close(r.release)
			if err != nil {
				return 0, 0
			}
			defer resp.Body.Close()
			_, _ = io.Copy(io.Discard, resp.Body)
			// The client never sends its last byte: the server cuts it at
			// server.read_timeout, its deadline for the body.
			return resp.StatusCode, time.Since(r.sent()) - c.readTimeout
		})
	})
	t.Run("8 concurrent 63 MiB bodies of 2.5 M tiny content blocks", func(t *testing.T) {
		chat, messages := tinyBlocks(2_500_000)
		paths := []string{"/v1/chat/completions", "/v1/messages"}
		var i int
		var mu sync.Mutex
		c.hostile(t, 8, func() (int, time.Duration) {
			mu.Lock()
			path, body := paths[i%2], [][]byte{chat, messages}[i%2]
			i++
			mu.Unlock()
			return c.post(path, body)
		})
	})
}

// coordinator is the binary under test.
type coordinator struct {
	url         string
	pid         int
	readTimeout time.Duration
}

// startCoordinator runs the binary with the chart's GOMEMLIMIT (and so
// the default memory budget, 900 MiB), a decode step to gateway, a short
// read timeout and a small answer cap, until the test ends.
func startCoordinator(t *testing.T, gateway string) *coordinator {
	t.Helper()
	bin := binary(t)
	restAddr, grpcAddr := freeAddr(t), freeAddr(t)
	const readTimeout = 2 * time.Second
	config := strings.Replace(binaryConfig(restAddr, grpcAddr, decodeStep), "http://127.0.0.1:1", gateway, 1)
	config = strings.Replace(config, "server:\n", fmt.Sprintf("server:\n  read_timeout: %s\n", readTimeout), 1)
	// A cap under the default (256 MiB) keeps the answers' vector short on
	// a loaded machine: reading past the cap is what it checks.
	config = strings.Replace(config, "gateway:\n", fmt.Sprintf("gateway:\n  max_answer_size: %d\n", answerCapMiB), 1)
	path := filepath.Join(t.TempDir(), "coordinator.yaml")
	require.NoError(t, os.WriteFile(path, []byte("log_level: 1\n"+config), 0o600))
	cmd := exec.Command(bin, "--config", path)
	cmd.Env = append(cleanEnv(), "GOMEMLIMIT="+chartMemLimit)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("coordinator's log:\n%s", stderr.String())
		}
	})
	c := &coordinator{url: "http://" + restAddr, pid: cmd.Process.Pid, readTimeout: readTimeout}
	require.Eventually(t, func() bool {
		resp, err := http.Get(c.url + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 60*time.Second, 20*time.Millisecond, "the coordinator is ready")
	return c
}

// hostile sends n hostile requests at once (send returns the status and
// how long after its last byte it came), an ordinary request after each
// second one meanwhile, and checks the three bounds.
func (c *coordinator) hostile(t *testing.T, n int, send func() (status int, afterLast time.Duration)) {
	t.Helper()
	type result struct {
		status int
		after  time.Duration
	}
	results := make(chan result, n)
	for range n {
		go func() {
			s, d := send()
			results <- result{s, d}
		}()
	}
	ordinary := make(chan int, 1)
	go func() { ordinary <- c.ordinary() }()
	for range n {
		r := <-results
		assert.GreaterOrEqual(t, r.status, 400, "a hostile request gets an error")
		assert.Less(t, r.after, answerBound, "the error comes within %s of the last byte (status %d)", answerBound, r.status)
	}
	assert.Equal(t, http.StatusOK, <-ordinary, "an ordinary request is served meanwhile")
	assert.Equal(t, http.StatusOK, c.ordinary(), "and after")
	hwm := c.peakRSS(t)
	t.Logf("peak RSS %d MiB", hwm>>20)
	assert.Less(t, hwm, int64(chartMemory), "peak RSS under the chart's memory limit")
}

// ordinary is the status of an ordinary chat request, retried as a client
// does while the server answers 429 (its budget held by the hostile
// requests).
func (c *coordinator) ordinary() int {
	body := []byte(`{"model":"sim-model","messages":[{"role":"user","content":"hello"}],"max_tokens":4}`)
	deadline := time.Now().Add(30 * time.Second)
	for {
		status, _ := c.post("/v1/chat/completions", body)
		if status != http.StatusTooManyRequests || time.Now().After(deadline) {
			return status
		}
		time.Sleep(100 * time.Millisecond) // Retry-After, shortened
	}
}

// post sends body and returns the status and the time since the body was
// sent.
func (c *coordinator) post(path string, body []byte) (int, time.Duration) {
	start := time.Now()
	resp, err := http.Post(c.url+path, "application/json", bytes.NewReader(body))
	if err != nil {
		return 0, time.Since(start)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, time.Since(start)
}

// peakRSS is the process's VmHWM.
func (c *coordinator) peakRSS(t *testing.T) int64 {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", c.pid))
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			require.NoError(t, err)
			return kb << 10
		}
	}
	t.Fatal("no VmHWM in /proc/<pid>/status")
	return 0
}

// hugeAnswers answers a request for hugeModel with a 200 JSON body of size
// bytes, generated as it is written (never held), and passes any other
// request to next.
func hugeAnswers(next http.Handler, size int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		if !bytes.Contains(body, []byte(`"`+hugeModel+`"`)) {
			r.Body = io.NopCloser(bytes.NewReader(body))
			next.ServeHTTP(w, r)
			return
		}
		head, tail := `{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"`, `"}}]}`
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.FormatInt(size, 10))
		if _, err := io.WriteString(w, head); err != nil {
			return
		}
		chunk := bytes.Repeat([]byte("a"), 64<<10)
		for left := size - int64(len(head)+len(tail)); left > 0; left -= int64(len(chunk)) {
			if _, err := w.Write(chunk[:min(int64(len(chunk)), left)]); err != nil {
				return // the coordinator stopped reading
			}
		}
		_, _ = io.WriteString(w, tail)
	})
}

// h2cClient speaks HTTP/2 without TLS: every request on one connection.
func h2cClient() *http.Client {
	p := new(http.Protocols)
	p.SetUnencryptedHTTP2(true)
	return &http.Client{Transport: &http.Transport{Protocols: p}, Timeout: time.Minute}
}

// oneByteThenWait is a body that sends one byte, then nothing until
// released (the answer came).
type oneByteThenWait struct {
	release chan struct{}
	mu      sync.Mutex
	at      time.Time
	done    bool
}

func (b *oneByteThenWait) Read(p []byte) (int, error) {
	b.mu.Lock()
	if !b.done {
		b.done, b.at = true, time.Now()
		b.mu.Unlock()
		p[0] = '{'
		return 1, nil
	}
	b.mu.Unlock()
	<-b.release
	return 0, context.Canceled
}

// sent is when the byte went.
func (b *oneByteThenWait) sent() time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.at
}

// tinyBlocks are a chat and a Messages body of n one-letter text blocks.
func tinyBlocks(n int) (chat, messages []byte) {
	var blocks bytes.Buffer
	for i := range n {
		if i > 0 {
			blocks.WriteByte(',')
		}
		blocks.WriteString(`{"type":"text","text":"a"}`)
	}
	chat = fmt.Appendf(nil, `{"model":"sim-model","max_tokens":1,"messages":[{"role":"user","content":[%s]}]}`, blocks.Bytes())
	messages = fmt.Appendf(nil, `{"model":"sim-model","max_tokens":1,"messages":[{"role":"user","content":[%s]}]}`, blocks.Bytes())
	return chat, messages
}
