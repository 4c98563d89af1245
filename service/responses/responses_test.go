package responses_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/coordinator-project/coordinator/internal/jsonbody"
	"github.com/coordinator-project/coordinator/internal/responsestore"
	"github.com/coordinator-project/coordinator/service/metrics"
	"github.com/coordinator-project/coordinator/service/responses"
)

// memoryStore is a Store over a fresh memory backend.
func memoryStore(t testing.TB, o responses.Options) *responses.Store {
	t.Helper()
	if o.TTL == 0 {
		o.TTL = time.Hour
	}
	if o.MaxHistoryBytes == 0 {
		o.MaxHistoryBytes = 1 << 20
	}
	mem := responsestore.NewMemory(responsestore.MemoryOptions{MaxBytes: 1 << 20, MaxEntries: 100})
	return responses.NewStore(mem, "memory", o, metrics.New().NewResponseStore())
}

// nullSink takes every answer and keeps none.
type nullSink struct{}

func (nullSink) Header(http.Header)                         {}
func (nullSink) Response(int, string, []byte) error         { return nil }
func (nullSink) Events(data [][]byte, names []string) error { return nil }

// begin runs Begin on body for tenant and returns the turn and the body
// as the legs would get it.
func begin(t *testing.T, s *responses.Store, tenant, body string) (*responses.Turn, string, error) {
	t.Helper()
	root, err := jsonbody.ParseObject([]byte(body))
	require.NoError(t, err)
	turn, _, err := s.Begin(context.Background(), root, tenant)
	return turn, string(root.Bytes()), err
}

// answer stores answer as turn's whole answer.
func answer(t *testing.T, turn *responses.Turn, answer string) {
	t.Helper()
	require.True(t, turn.Keep())
	require.NoError(t, turn.Sink(nullSink{}).Response(http.StatusOK, "application/json", []byte(answer)))
	turn.Finish(context.Background(), discard(), "r")
}

const answer1 = `{"id":"resp_1","object":"response","status":"completed","output":[{"id":"msg_o1","type":"message","role":"assistant","content":[{"type":"output_text","text":"hello"}]}]}`

// TestBeginRebuildsTheConversation: the body that continues a stored
// response gets, in place of its input, the earlier input items (a string
// input as one user message), the earlier output items and its own input;
// previous_response_id goes, instructions stay the body's own; every other
// byte is the client's.
func TestBeginRebuildsTheConversation(t *testing.T) {
	t.Parallel()
	s := memoryStore(t, responses.Options{StoreByDefault: true})
	turn, body, err := begin(t, s, "", `{"model":"m","input":"hi","instructions":"be brief"}`)
	require.NoError(t, err)
	assert.Equal(t, `{"model":"m","input":"hi","instructions":"be brief"}`, body, "a first turn is sent as it came")
	answer(t, turn, answer1)

	turn, body, err = begin(t, s, "", `{"model":"m","input":[{"role":"user","content":"more"}],"previous_response_id":"resp_1","store":false}`)
	require.NoError(t, err)
	assert.Equal(t, `{"model":"m","input":[`+
		`{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]},`+
		`{"id":"msg_o1","type":"message","role":"assistant","content":[{"type":"output_text","text":"hello"}]},`+
		`{"role":"user","content":"more"}],"store":false}`, body)
	assert.False(t, turn.Keep(), `"store": false: read, not stored`)
}

func TestBeginRefusals(t *testing.T) {
	t.Parallel()
	s := memoryStore(t, responses.Options{StoreByDefault: true, MaxHistoryBytes: 300})
	turn, _, err := begin(t, s, "", `{"input":"hi"}`)
	require.NoError(t, err)
	answer(t, turn, answer1)
	for _, tc := range []struct {
		name, body string
		code       codes.Code
		msg        string
	}{
		{"missing", `{"input":"x","previous_response_id":"resp_2"}`, codes.NotFound, "Previous response with id 'resp_2' not found."},
		{"not a string", `{"input":"x","previous_response_id":7}`, codes.InvalidArgument, `"previous_response_id" must be a non-empty string`},
		{"store not a flag", `{"input":"x","store":"maybe"}`, codes.InvalidArgument, `"store" must be a boolean`},
		{"history past the bound", `{"input":"` + string(bytesOf('a', 200)) + `","previous_response_id":"resp_1"}`, codes.InvalidArgument, "past responses.max_history_bytes (300)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, _, err := begin(t, s, "", tc.body)
			st := status.Convert(err)
			assert.Equal(t, tc.code, st.Code())
			assert.Contains(t, st.Message(), tc.msg)
		})
	}
}

func bytesOf(c byte, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = c
	}
	return b
}

// TestStreamCapture: a stream's terminal event's response object is what
// is stored, copied out of the event buffers (reused by the caller); a
// stream cut before it stores nothing.
func TestStreamCapture(t *testing.T) {
	t.Parallel()
	s := memoryStore(t, responses.Options{StoreByDefault: true})
	turn, _, err := begin(t, s, "", `{"input":"hi","stream":true}`)
	require.NoError(t, err)
	sink := turn.Sink(nullSink{})
	require.NoError(t, sink.Events([][]byte{[]byte(`{"type":"response.created","response":{"id":"resp_s","status":"in_progress"}}`)}, []string{"response.created"}))
	final := []byte(`{"type":"response.incomplete","sequence_number":9,"response":{"id":"resp_s","status":"incomplete","output":[]}}`)
	require.NoError(t, sink.Events([][]byte{[]byte(`{"type":"response.output_text.delta","delta":"x"}`), final}, []string{"response.output_text.delta", "response.incomplete"}))
	copy(final, bytesOf('x', len(final))) // the caller reuses its buffer
	turn.Finish(context.Background(), discard(), "r")
	got, err := s.Response(context.Background(), "", "resp_s")
	require.NoError(t, err)
	assert.JSONEq(t, `{"id":"resp_s","status":"incomplete","output":[]}`, string(got), "stored with the status the worker gave it")

	turn, _, err = begin(t, s, "", `{"input":"hi","stream":true}`)
	require.NoError(t, err)
	sink = turn.Sink(nullSink{})
	require.NoError(t, sink.Events([][]byte{[]byte(`{"type":"response.created","response":{"id":"resp_cut","status":"in_progress"}}`)}, []string{"response.created"}))
	turn.Finish(context.Background(), discard(), "r")
	_, err = s.Response(context.Background(), "", "resp_cut")
	assert.Equal(t, codes.NotFound, status.Code(err), "cut before the terminal event: not stored")
}

// TestTenantIsolation: another tenant's id answers exactly as a missing
// one, on every operation; the tenant comes from the configured header,
// "authorization" as the bearer token's digest.
func TestTenantIsolation(t *testing.T) {
	t.Parallel()
	s := memoryStore(t, responses.Options{StoreByDefault: true, TenantHeader: "OpenAI-Project"})
	a := s.Tenant(metadata.Pairs("openai-project", "a"))
	b := s.Tenant(metadata.Pairs("openai-project", "b"))
	require.Equal(t, "a", a)
	turn, _, err := begin(t, s, a, `{"input":"hi"}`)
	require.NoError(t, err)
	answer(t, turn, answer1)
	empty := memoryStore(t, responses.Options{})
	ctx := context.Background()

	_, errB := s.Response(ctx, b, "resp_1")
	_, errMissing := empty.Response(ctx, b, "resp_1")
	assert.Equal(t, status.Convert(errMissing).Proto(), status.Convert(errB).Proto())
	_, errB = s.InputItems(ctx, b, "resp_1", responses.Page{})
	_, errMissing = empty.InputItems(ctx, b, "resp_1", responses.Page{})
	assert.Equal(t, status.Convert(errMissing).Proto(), status.Convert(errB).Proto())
	_, _, errB = begin(t, s, b, `{"input":"x","previous_response_id":"resp_1"}`)
	_, _, errMissing = begin(t, empty, b, `{"input":"x","previous_response_id":"resp_1"}`)
	assert.Equal(t, status.Convert(errMissing).Proto(), status.Convert(errB).Proto())
	_, errB = s.Delete(ctx, b, "resp_1")
	assert.Equal(t, codes.NotFound, status.Code(errB))
	_, err = s.Response(ctx, a, "resp_1")
	assert.NoError(t, err, "the owner's response survives another tenant's delete")

	auth := memoryStore(t, responses.Options{TenantHeader: "authorization"})
	tenant := auth.Tenant(metadata.Pairs("authorization", "Bearer sk-secret"))
	sum := sha256.Sum256([]byte("sk-secret"))
	assert.Equal(t, "sha256:"+hex.EncodeToString(sum[:]), tenant, "the token's digest, never the token")
	assert.Equal(t, tenant, auth.Tenant(metadata.Pairs("authorization", "bearer sk-secret")))
}

// TestStoreUnavailable: a request that needs a store that does not answer
// gets UNAVAILABLE before any leg; one that needs none is not held up.
func TestStoreUnavailable(t *testing.T) {
	t.Parallel()
	rd, err := responsestore.NewRedis(responsestore.RedisOptions{URL: "redis://127.0.0.1:1", MaxBytes: 1 << 20, Timeout: time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { _ = rd.Close() })
	s := responses.NewStore(rd, "redis", responses.Options{TTL: time.Hour, StoreByDefault: true, MaxHistoryBytes: 1 << 20}, metrics.New().NewResponseStore())
	_, _, err = begin(t, s, "", `{"input":"hi","store":true}`)
	assert.Equal(t, codes.Unavailable, status.Code(err))
	assert.Equal(t, `"store": true needs the response store, which is unavailable`, status.Convert(err).Message())
	_, _, err = begin(t, s, "", `{"input":"hi"}`)
	assert.Equal(t, codes.Unavailable, status.Code(err), "store_by_default: absent is true")
	turn, _, err := begin(t, s, "", `{"input":"hi","store":false}`)
	assert.NoError(t, err, "stateless: no store needed")
	assert.Nil(t, turn)
}

// TestInputItemsPages lists the items newest first by default, 1..100 a
// page, after an id, each with its id.
func TestInputItemsPages(t *testing.T) {
	t.Parallel()
	s := memoryStore(t, responses.Options{StoreByDefault: true})
	turn, _, err := begin(t, s, "", `{"input":[{"id":"a","role":"user","content":"1"},{"id":"b","role":"user","content":"2"},{"id":"c","role":"user","content":"3"}]}`)
	require.NoError(t, err)
	answer(t, turn, answer1)
	ctx := context.Background()
	got, err := s.InputItems(ctx, "", "resp_1", responses.Page{Limit: 2})
	require.NoError(t, err)
	assert.Equal(t, `{"object":"list","data":[{"id":"c","role":"user","content":"3"},{"id":"b","role":"user","content":"2"}],"first_id":"c","last_id":"b","has_more":true}`, string(got))
	got, err = s.InputItems(ctx, "", "resp_1", responses.Page{Limit: 2, After: "b"})
	require.NoError(t, err)
	assert.Equal(t, `{"object":"list","data":[{"id":"a","role":"user","content":"1"}],"first_id":"a","last_id":"a","has_more":false}`, string(got))
	got, err = s.InputItems(ctx, "", "resp_1", responses.Page{Order: "asc", After: "c"})
	require.NoError(t, err)
	assert.Equal(t, `{"object":"list","data":[],"first_id":null,"last_id":null,"has_more":false}`, string(got))
	_, err = s.InputItems(ctx, "", "resp_1", responses.Page{Limit: 101})
	assert.Equal(t, codes.InvalidArgument, status.Code(err))

	// A string input is one user message, given a msg_ id, the same on
	// every listing.
	turn, _, err = begin(t, s, "", `{"input":"hi"}`)
	require.NoError(t, err)
	answer(t, turn, `{"id":"resp_2","output":[]}`)
	first, err := s.InputItems(ctx, "", "resp_2", responses.Page{})
	require.NoError(t, err)
	again, err := s.InputItems(ctx, "", "resp_2", responses.Page{})
	require.NoError(t, err)
	assert.Equal(t, string(first), string(again))
	assert.Regexp(t, `^\{"object":"list","data":\[\{"id":"(msg_[0-9a-f]{32})","type":"message","role":"user","content":\[\{"type":"input_text","text":"hi"\}\]\}\],"first_id":"msg_[0-9a-f]{32}","last_id":"msg_[0-9a-f]{32}","has_more":false\}$`, string(first))

	// An item whose id is not a string gets one in its place, not a second.
	turn, _, err = begin(t, s, "", `{"input":[{"id":null,"role":"user","content":"x"}]}`)
	require.NoError(t, err)
	answer(t, turn, `{"id":"resp_3","output":[]}`)
	got, err = s.InputItems(ctx, "", "resp_3", responses.Page{})
	require.NoError(t, err)
	assert.Regexp(t, `^\{"object":"list","data":\[\{"id":"msg_[0-9a-f]{32}","role":"user","content":"x"\}\]`, string(got))

	deleted, err := s.Delete(ctx, "", "resp_2")
	require.NoError(t, err)
	assert.Equal(t, `{"id":"resp_2","object":"response","deleted":true}`, string(deleted))
	_, err = s.Delete(ctx, "", "resp_2")
	assert.Equal(t, codes.NotFound, status.Code(err))
	assert.Equal(t, "Response with id 'resp_2' not found.", status.Convert(err).Message())
}
