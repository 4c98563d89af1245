package asyncbroker_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const unknownBody = `{"error":{"message":"request id is unknown, expired, or already deleted","type":"invalid_request_error","code":"UNKNOWN_REQUEST"}}`

func TestLookupAndDelete(t *testing.T) {
	t.Parallel()
	env := newBroker(t, nil)
	ctx := t.Context()

	// Unknown id: gone.
	a := env.step.Lookup(ctx, "team-a", "nope")
	assert.Equal(t, http.StatusGone, a.Status)
	assert.JSONEq(t, unknownBody, answerBody(t, a))

	// Pending while the active marker lives, for its own tenant only.
	require.NoError(t, env.rdb.Set(ctx, "request-active:team-a:pending-id", "token", time.Hour).Err())
	a = env.step.Lookup(ctx, "team-a", "pending-id")
	assert.Equal(t, http.StatusAccepted, a.Status)
	assert.Equal(t, `{"id":"pending-id","status":"pending"}`, string(a.Body))
	assert.Equal(t, http.StatusGone, env.step.Lookup(ctx, "team-b", "pending-id").Status, "another tenant cannot learn the id exists")

	// Ready: delivered verbatim; the mailbox then lives the fetch grace
	// (60 s by default) and can be fetched again meanwhile.
	key := "results:req:team-a:ready-id"
	require.NoError(t, env.rdb.LPush(ctx, key, result{StatusCode: 200, Payload: `{"done":true}`}.JSON(t)).Err())
	require.NoError(t, env.rdb.Expire(ctx, key, time.Hour).Err())
	a = env.step.Lookup(ctx, "team-a", "ready-id")
	assert.Equal(t, http.StatusOK, a.Status)
	assert.Equal(t, "application/json", a.ContentType)
	assert.Equal(t, `{"done":true}`, string(a.Body))
	ttl, err := env.rdb.TTL(ctx, key).Result()
	require.NoError(t, err)
	assert.Greater(t, ttl, time.Duration(0))
	assert.LessOrEqual(t, ttl, time.Minute)
	assert.Equal(t, http.StatusOK, env.step.Lookup(ctx, "team-a", "ready-id").Status, "fetch is not destructive")
	assert.Equal(t, http.StatusGone, env.step.Lookup(ctx, "team-b", "ready-id").Status, "wrong tenant")

	// Delete is tenant-scoped, 204 either way.
	a = env.step.Delete(ctx, "team-b", "ready-id")
	assert.Equal(t, http.StatusNoContent, a.Status)
	assert.Empty(t, a.Body)
	n, err := env.rdb.Exists(ctx, key).Result()
	require.NoError(t, err)
	assert.Equal(t, int64(1), n, "another tenant cannot delete it")
	assert.Equal(t, http.StatusNoContent, env.step.Delete(ctx, "team-a", "ready-id").Status)
	n, err = env.rdb.Exists(ctx, key).Result()
	require.NoError(t, err)
	assert.Zero(t, n)
	assert.Equal(t, http.StatusGone, env.step.Lookup(ctx, "team-a", "ready-id").Status)
	assert.Equal(t, http.StatusNoContent, env.step.Delete(ctx, "team-a", "never-was").Status, "204 when absent")

	// No tenant is the default tenant.
	require.NoError(t, env.rdb.LPush(ctx, "results:req:default:d-id", result{StatusCode: 201, Payload: `{}`}.JSON(t)).Err())
	assert.Equal(t, http.StatusCreated, env.step.Lookup(ctx, "", "d-id").Status)
}

func TestStoredResults(t *testing.T) {
	t.Parallel()
	env := newBroker(t, nil)
	tests := []struct {
		name   string
		stored string
		status int
		body   string
	}{
		{"HTTP answer verbatim", result{StatusCode: 200, Payload: "{\"a\": 1}\n"}.JSON(t), 200, "{\"a\": 1}\n"},
		{"worker error verbatim", result{StatusCode: 503, Payload: `{"error":"busy"}`}.JSON(t), 503, `{"error":"busy"}`},
		{"gate dropped", result{ErrorCode: "GATE_DROPPED", ErrorMessage: "dropped"}.JSON(t), 429,
			`{"error":{"message":"dropped","type":"rate_limit_error","code":"GATE_DROPPED"}}`},
		{"deadline exceeded", result{ErrorCode: "DEADLINE_EXCEEDED", ErrorMessage: "deadline exceeded"}.JSON(t), 504,
			`{"error":{"message":"deadline exceeded","type":"timeout_error","code":"DEADLINE_EXCEEDED"}}`},
		{"invalid request", result{ErrorCode: "INVALID_REQUEST", ErrorMessage: "bad"}.JSON(t), 400,
			`{"error":{"message":"bad","type":"invalid_request_error","code":"INVALID_REQUEST"}}`},
		{"cancelled", result{ErrorCode: "CANCELLED", ErrorMessage: "cancelled"}.JSON(t), 499,
			`{"error":{"message":"cancelled","type":"cancelled","code":"CANCELLED"}}`},
		{"gate error", result{ErrorCode: "GATE_ERROR", ErrorMessage: "gate"}.JSON(t), 502,
			`{"error":{"message":"gate","type":"api_error","code":"GATE_ERROR"}}`},
		{"inference error", result{ErrorCode: "INFERENCE_ERROR", ErrorMessage: "boom"}.JSON(t), 502,
			`{"error":{"message":"boom","type":"api_error","code":"INFERENCE_ERROR"}}`},
		{"status out of range", result{StatusCode: 42, Payload: `{}`}.JSON(t), 502,
			`{"error":{"message":"stored result has invalid status_code 42","type":"api_error","code":"MALFORMED_RESULT"}}`},
		{"not JSON", `{"status_code":`, 500,
			`{"error":{"message":"result lookup failed","type":"api_error","code":"LOOKUP_FAILED"}}`},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			id := "id-" + string(rune('a'+i))
			require.NoError(t, env.rdb.LPush(t.Context(), "results:req:team-a:"+id, tt.stored).Err())
			a := env.step.Lookup(t.Context(), "team-a", id)
			assert.Equal(t, tt.status, a.Status)
			if tt.status == 200 || tt.status == 503 {
				assert.Equal(t, "application/json", a.ContentType)
				assert.Equal(t, tt.body, string(a.Body), "verbatim")
				return
			}
			require.NotNil(t, a.Refusal, "a failure is a refusal, framed by the service")
			assert.JSONEq(t, tt.body, answerBody(t, a))
		})
	}
}

func TestFetchGrace(t *testing.T) {
	t.Parallel()
	seed := func(t *testing.T, env *brokerEnv) string {
		t.Helper()
		key := "results:req:team-a:grace-id"
		require.NoError(t, env.rdb.LPush(t.Context(), key, result{StatusCode: 200, Payload: `{"done":true}`}.JSON(t)).Err())
		require.NoError(t, env.rdb.Expire(t.Context(), key, time.Hour).Err())
		return key
	}
	t.Run("custom grace shrinks the mailbox TTL", func(t *testing.T) {
		t.Parallel()
		env := newBroker(t, map[string]any{"fetch_grace_seconds": 5})
		key := seed(t, env)
		require.Equal(t, http.StatusOK, env.step.Lookup(t.Context(), "team-a", "grace-id").Status)
		ttl, err := env.rdb.TTL(t.Context(), key).Result()
		require.NoError(t, err)
		assert.Greater(t, ttl, time.Duration(0))
		assert.LessOrEqual(t, ttl, 5*time.Second)
	})
	t.Run("zero grace deletes on delivery", func(t *testing.T) {
		t.Parallel()
		env := newBroker(t, map[string]any{"fetch_grace_seconds": 0})
		key := seed(t, env)
		require.Equal(t, http.StatusOK, env.step.Lookup(t.Context(), "team-a", "grace-id").Status)
		n, err := env.rdb.Exists(t.Context(), key).Result()
		require.NoError(t, err)
		assert.Zero(t, n)
	})
}
