package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// identified is a rollout's outcome, named by its request id.
type identified interface{ rolloutID() string }

// collectRollouts reads n outcomes from ch, each id once, within 3 minutes.
func collectRollouts[T identified](t *testing.T, ch <-chan T, n int) map[string]T {
	t.Helper()
	got := map[string]T{}
	for range n {
		select {
		case ro := <-ch:
			id := ro.rolloutID()
			_, dup := got[id]
			require.False(t, dup, "rollout %s answered twice", id)
			got[id] = ro
		case <-time.After(3 * time.Minute):
			t.Fatalf("%d of %d rollouts answered", len(got), n)
		}
	}
	return got
}

// postRollout posts body to path on the coordinator's REST port with
// header and the rollout's id, and gives read the answer: each data line
// of a stream answered 200, else the whole body. On any goroutine: it
// reports, never fails the test.
func (r *rlStack) postRollout(ctx context.Context, path, id, body string, stream bool, header http.Header, read func(string) error) (int, http.Header, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.st.restURL+path, strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header = header.Clone()
	if req.Header == nil {
		req.Header = http.Header{}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Request-Id", id)
	resp, err := r.st.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	if !stream || resp.StatusCode != http.StatusOK {
		raw, err := io.ReadAll(resp.Body)
		if err == nil {
			err = read(string(raw))
		}
		return resp.StatusCode, resp.Header, err
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			if err := read(data); err != nil {
				return resp.StatusCode, resp.Header, err
			}
		}
	}
	return resp.StatusCode, resp.Header, sc.Err()
}

// sendRollouts posts every rollout at once (post, within 2 minutes) and
// returns a channel of them as they are answered.
func sendRollouts[T any](rollouts []T, post func(context.Context, T)) <-chan T {
	out := make(chan T, len(rollouts))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	var wg sync.WaitGroup
	for _, ro := range rollouts {
		wg.Go(func() {
			post(ctx, ro)
			out <- ro
		})
	}
	go func() {
		wg.Wait()
		cancel()
	}()
	return out
}

// relayedAnswer is one REST rollout of a relayed API (chat, completions):
// its request and what came back, read whole (a stream's events joined).
type relayedAnswer struct {
	id     string
	body   string
	stream bool
	// raw is the answer's body, or each event's data; text the output;
	// ids every answer id; finishes every finish_reason not null; usage
	// the last and usages how many; done the [DONE] events.
	raw      []string
	text     strings.Builder
	ids      []string
	finishes []string
	usage    restUsage
	usages   int
	done     int
	status   int
	header   http.Header
	err      error
}

// assertOneAnswer checks a continued rollout's answer against whole, the
// same request run uninterrupted: its text and usage, once; one
// finish_reason, the real end; unary, one answer's header naming both
// weight versions; streamed, no abort, one [DONE] last, one id.
func (ro *relayedAnswer) assertOneAnswer(t *testing.T, whole *relayedAnswer) {
	t.Helper()
	id := ro.id
	require.NoError(t, ro.err, id)
	require.Equal(t, http.StatusOK, ro.status, "%s: %v", id, ro.raw)
	assert.Equal(t, whole.text.String(), ro.text.String(), "%s: the uninterrupted text, every token once", id)
	assert.Equal(t, []string{"length"}, ro.finishes, "%s: one finish_reason, the real end", id)
	assert.Equal(t, 1, ro.usages, "%s: usage once", id)
	assert.Equal(t, whole.usage, ro.usage, "%s: one uninterrupted answer's usage", id)
	if !ro.stream {
		for _, k := range []string{"Date", "Server-Timing"} {
			assert.Len(t, ro.header.Values(k), 1, "%s: one answer's header %s", id, k)
		}
		assert.Equal(t, []string{"v1,v2"}, ro.header.Values("X-Weight-Version"), "%s: the versions of the whole answer", id)
		return
	}
	for _, ev := range ro.raw {
		assert.NotContains(t, ev, `"abort"`, "%s: the abort is held back", id)
	}
	assert.Equal(t, 1, ro.done, "%s: one [DONE]", id)
	assert.Equal(t, "[DONE]", ro.raw[len(ro.raw)-1], id)
	require.NotEmpty(t, ro.ids, id)
	for _, v := range ro.ids {
		if !assert.Equal(t, ro.ids[0], v, "%s: one id", id) {
			break
		}
	}
}
