package rest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/internal/membudget"
)

// startBudgetFront serves a Handler with budget b and no service behind
// it: only what the front answers itself (refusals) can be asked.
func startBudgetFront(t *testing.T, b *membudget.Budget, maxBody int64) string {
	t.Helper()
	h := testHandler(t, nil, Options{MaxBody: maxBody, Budget: b})
	front := httptest.NewServer(h)
	t.Cleanup(front.Close)
	return front.URL
}

// A body is read as its bytes arrive, whatever Content-Length declares:
// a client that declares 60 MiB and sends one byte holds one small chunk
// (the old front allocated the declared length before any byte came).
func TestDeclaredLengthIsNotAllocatedUpFront(t *testing.T) {
	b := membudget.New(1<<30, 0)
	url := startBudgetFront(t, b, 64<<20)
	conn, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	require.NoError(t, err)
	defer conn.Close()

	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err = fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: c\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{", 60<<20)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return b.InUse() > 0 }, 10*time.Second, time.Millisecond, "the body's read began")
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	assert.LessOrEqual(t, b.InUse(), int64(64<<10), "one small chunk drawn")
	assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(16<<20), "nothing near the declared 60 MiB allocated")
}

// Past the memory budget the front refuses a body: 429 with Retry-After
// (rate_limit_error) while other requests hold the budget, 413 when the
// body can never fit; the refused request gives back what it drew.
func TestBodyPastTheBudget(t *testing.T) {
	t.Parallel()
	b := membudget.New(1<<20, 0)
	url := startBudgetFront(t, b, 4<<20)
	post := func(body []byte) (*http.Response, map[string]any) {
		resp, err := http.Post(url+"/v1/chat/completions", "application/json", bytes.NewReader(body))
		require.NoError(t, err)
		defer resp.Body.Close()
		var e map[string]any
		data, _ := io.ReadAll(resp.Body)
		require.NoError(t, json.Unmarshal(data, &e), "%s", data)
		return resp, e["error"].(map[string]any)
	}
	body := func(n int) []byte { return fmt.Appendf(nil, `{"model":"m","prompt":"%s"}`, strings.Repeat("x", n)) }

	resp, e := post(body(600 << 10)) // 2 × 600 KiB: more than the whole budget
	assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
	assert.Contains(t, e["message"], "more than the whole budget")
	assert.Empty(t, resp.Header.Get("Retry-After"))

	holder := b.Open()
	require.NoError(t, holder.Take(context.Background(), 900<<10))
	resp, e = post(body(100 << 10))
	assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode)
	assert.Equal(t, "1", resp.Header.Get("Retry-After"))
	assert.Equal(t, "rate_limit_error", e["type"])
	assert.Contains(t, e["message"], "memory budget")
	assert.Contains(t, e["message"], "request_id: ")
	assert.EqualValues(t, 900<<10, b.InUse(), "the refused request gave back what it drew")
	holder.Close()
	assert.Zero(t, b.InUse())
	assert.EqualValues(t, 2, b.Refused())
}
