package responses_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/coordinator-project/coordinator/internal/responsestore"
	"github.com/coordinator-project/coordinator/service/metrics"
	"github.com/coordinator-project/coordinator/service/responses"
	"github.com/coordinator-project/coordinator/steps/steptest"
)

// conversationStores are a Store over each backend.
func conversationStores(t *testing.T) map[string]*responses.Store {
	t.Helper()
	rd := steptest.StartRedis(t)
	r, err := responsestore.NewRedis(responsestore.RedisOptions{URL: rd.URL, Prefix: "test:", MaxBytes: 1 << 20})
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Close() })
	o := responses.Options{TTL: time.Hour, MaxHistoryBytes: 1 << 20}
	return map[string]*responses.Store{
		"memory": memoryStore(t, o),
		"redis":  responses.NewStore(r, "redis", o, metrics.New().NewResponseStore()),
	}
}

// convID is the id of a conversation object.
func convID(t *testing.T, object []byte) string {
	t.Helper()
	var c struct {
		ID string `json:"id"`
	}
	require.NoError(t, json.Unmarshal(object, &c))
	require.Regexp(t, `^conv_[0-9a-f]{32}$`, c.ID)
	return c.ID
}

// finish gives turn answer as its whole answer and finishes it.
func finish(t *testing.T, turn *responses.Turn, answer string) {
	t.Helper()
	require.NoError(t, turn.Sink(nullSink{}).Response(http.StatusOK, "application/json", []byte(answer)))
	turn.Finish(context.Background(), discard(), "r")
}

// TestConversationShapes: every route answers OpenAI's shape.
func TestConversationShapes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := memoryStore(t, responses.Options{})
	created, err := s.CreateConversation(ctx, "", []byte(`{"metadata":{"topic":"demo"},"items":[{"type":"message","role":"user","content":"hi"},{"id":"msg_given","type":"message","role":"assistant","content":"hello"}]}`))
	require.NoError(t, err)
	id := convID(t, created)
	assert.Regexp(t, `^\{"id":"`+id+`","object":"conversation","created_at":[0-9]+,"metadata":\{"topic":"demo"\}\}$`, string(created))
	got, err := s.Conversation(ctx, "", id)
	require.NoError(t, err)
	assert.Equal(t, string(created), string(got))

	updated, err := s.UpdateConversation(ctx, "", id, []byte(`{"metadata":{"topic":"other","k":"v"}}`))
	require.NoError(t, err)
	assert.Regexp(t, `"metadata":\{"topic":"other","k":"v"\}\}$`, string(updated))
	got, err = s.Conversation(ctx, "", id)
	require.NoError(t, err)
	assert.Equal(t, string(updated), string(got))

	list, err := s.ConversationItems(ctx, "", id, responses.Page{Order: "asc"})
	require.NoError(t, err)
	assert.Regexp(t, `^\{"object":"list","data":\[\{"id":"(msg_[0-9a-f]{32})","type":"message","role":"user","content":"hi"\},`+
		`\{"id":"msg_given","type":"message","role":"assistant","content":"hello"\}\],"first_id":"msg_[0-9a-f]{32}","last_id":"msg_given","has_more":false\}$`, string(list))

	added, err := s.AddConversationItems(ctx, "", id, []byte(`{"items":[{"type":"message","role":"user","content":"a"},{"id":"msg_b","type":"message","role":"user","content":"b"}]}`))
	require.NoError(t, err)
	assert.Regexp(t, `^\{"object":"list","data":\[\{"id":"msg_[0-9a-f]{32}","type":"message","role":"user","content":"a"\},`+
		`\{"id":"msg_b","type":"message","role":"user","content":"b"\}\],"first_id":"msg_[0-9a-f]{32}","last_id":"msg_b","has_more":false\}$`, string(added))

	item, err := s.ConversationItem(ctx, "", id, "msg_b")
	require.NoError(t, err)
	assert.Equal(t, `{"id":"msg_b","type":"message","role":"user","content":"b"}`, string(item))
	after, err := s.DeleteConversationItem(ctx, "", id, "msg_given")
	require.NoError(t, err)
	assert.Equal(t, string(updated), string(after), "deleting an item answers the conversation")
	_, err = s.ConversationItem(ctx, "", id, "msg_given")
	assert.Equal(t, codes.NotFound, status.Code(err))
	assert.Equal(t, "Item with id 'msg_given' not found.", status.Convert(err).Message())
	_, err = s.DeleteConversationItem(ctx, "", id, "msg_given")
	assert.Equal(t, codes.NotFound, status.Code(err))
	list, err = s.ConversationItems(ctx, "", id, responses.Page{Limit: 2})
	require.NoError(t, err)
	assert.Regexp(t, `^\{"object":"list","data":\[\{"id":"msg_b",.*\},\{"id":"msg_[0-9a-f]{32}","type":"message","role":"user","content":"a"\}\],"first_id":"msg_b","last_id":"msg_[0-9a-f]{32}","has_more":true\}$`, string(list))

	deleted, err := s.DeleteConversation(ctx, "", id)
	require.NoError(t, err)
	assert.Equal(t, `{"id":"`+id+`","object":"conversation.deleted","deleted":true}`, string(deleted))
	_, err = s.Conversation(ctx, "", id)
	assert.Equal(t, codes.NotFound, status.Code(err))
	assert.Equal(t, "Conversation with id '"+id+"' not found.", status.Convert(err).Message())

	empty, err := s.CreateConversation(ctx, "", nil)
	require.NoError(t, err)
	assert.Regexp(t, `"metadata":\{\}\}$`, string(empty), "no body: no items, empty metadata")
}

func TestConversationRefusals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := memoryStore(t, responses.Options{})
	created, err := s.CreateConversation(ctx, "", []byte(`{}`))
	require.NoError(t, err)
	id := convID(t, created)
	items21 := `[` + repeat(`{"role":"user","content":"x"}`, 21) + `]`
	for _, tc := range []struct {
		name string
		call func() error
		msg  string
	}{
		{"create: not json", func() error { _, err := s.CreateConversation(ctx, "", []byte(`{`)); return err }, "body:"},
		{"create: 21 items", func() error { _, err := s.CreateConversation(ctx, "", []byte(`{"items":`+items21+`}`)); return err }, "at most 20 items"},
		{"create: item not an object", func() error { _, err := s.CreateConversation(ctx, "", []byte(`{"items":["hi"]}`)); return err }, `"items[0]" must be an object`},
		{"create: metadata not strings", func() error { _, err := s.CreateConversation(ctx, "", []byte(`{"metadata":{"a":1}}`)); return err }, `"metadata.a" must be a string`},
		{"update: no metadata", func() error { _, err := s.UpdateConversation(ctx, "", id, []byte(`{}`)); return err }, `"metadata" is required`},
		{"add: no items", func() error { _, err := s.AddConversationItems(ctx, "", id, []byte(`{}`)); return err }, `"items" is required`},
		{"add: 21 items", func() error {
			_, err := s.AddConversationItems(ctx, "", id, []byte(`{"items":`+items21+`}`))
			return err
		}, "at most 20 items"},
		{"list: limit", func() error { _, err := s.ConversationItems(ctx, "", id, responses.Page{Limit: 101}); return err }, "limit"},
		{"list: after unknown", func() error { _, err := s.ConversationItems(ctx, "", id, responses.Page{After: "msg_x"}); return err }, "after: no item with id 'msg_x'"},
	} {
		err := tc.call()
		assert.Equal(t, codes.InvalidArgument, status.Code(err), tc.name)
		assert.Contains(t, status.Convert(err).Message(), tc.msg, tc.name)
	}
}

func repeat(s string, n int) string {
	out := s
	for range n - 1 {
		out += "," + s
	}
	return out
}

// TestConversationTenantIsolation: another tenant's conversation answers
// every route exactly as a missing one, and is left as it was.
func TestConversationTenantIsolation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := memoryStore(t, responses.Options{})
	created, err := s.CreateConversation(ctx, "a", []byte(`{"items":[{"id":"msg_1","role":"user","content":"x"}]}`))
	require.NoError(t, err)
	id := convID(t, created)
	empty := memoryStore(t, responses.Options{})
	same := func(name string, call func(s *responses.Store) error) {
		t.Helper()
		errB, errMissing := call(s), call(empty)
		require.Error(t, errB, name)
		assert.Equal(t, codes.NotFound, status.Code(errB), name)
		assert.Equal(t, status.Convert(errMissing).Proto(), status.Convert(errB).Proto(), name)
	}
	same("get", func(s *responses.Store) error { _, err := s.Conversation(ctx, "b", id); return err })
	same("update", func(s *responses.Store) error {
		_, err := s.UpdateConversation(ctx, "b", id, []byte(`{"metadata":{}}`))
		return err
	})
	same("list", func(s *responses.Store) error {
		_, err := s.ConversationItems(ctx, "b", id, responses.Page{})
		return err
	})
	same("add", func(s *responses.Store) error {
		_, err := s.AddConversationItems(ctx, "b", id, []byte(`{"items":[{"role":"user","content":"y"}]}`))
		return err
	})
	same("get item", func(s *responses.Store) error { _, err := s.ConversationItem(ctx, "b", id, "msg_1"); return err })
	same("delete item", func(s *responses.Store) error { _, err := s.DeleteConversationItem(ctx, "b", id, "msg_1"); return err })
	same("delete", func(s *responses.Store) error { _, err := s.DeleteConversation(ctx, "b", id); return err })
	same("turn", func(s *responses.Store) error {
		_, _, err := begin(t, s, "b", `{"input":"x","conversation":"`+id+`"}`)
		return err
	})
	list, err := s.ConversationItems(ctx, "a", id, responses.Page{})
	require.NoError(t, err)
	assert.Equal(t, `{"object":"list","data":[{"id":"msg_1","role":"user","content":"x"}],"first_id":"msg_1","last_id":"msg_1","has_more":false}`, string(list),
		"the owner's conversation is untouched")
}

// TestConversationTurns: "conversation" on a Responses request puts the
// conversation's items before the input (the legs get no
// "conversation"), and the request's own items and the answer's output are
// appended once the answer came; not with previous_response_id.
func TestConversationTurns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := memoryStore(t, responses.Options{StoreByDefault: true})
	created, err := s.CreateConversation(ctx, "", []byte(`{"items":[{"type":"message","role":"system","content":"be brief"}]}`))
	require.NoError(t, err)
	id := convID(t, created)

	turn, body, err := begin(t, s, "", `{"model":"m","input":"hi","conversation":"`+id+`","store":false}`)
	require.NoError(t, err)
	assert.Equal(t, `{"model":"m","input":[{"type":"message","role":"system","content":"be brief"},`+
		`{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}],"store":false}`, body)
	finish(t, turn, answer1)

	turn, body, err = begin(t, s, "", `{"model":"m","input":[{"role":"user","content":"more"}],"conversation":{"id":"`+id+`"}}`)
	require.NoError(t, err)
	assert.Equal(t, `{"model":"m","input":[{"type":"message","role":"system","content":"be brief"},`+
		`{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]},`+
		`{"id":"msg_o1","type":"message","role":"assistant","content":[{"type":"output_text","text":"hello"}]},`+
		`{"role":"user","content":"more"}]}`, body)
	finish(t, turn, `{"id":"resp_2","status":"failed","output":[{"id":"msg_o2","type":"message"}]}`)
	list, err := s.ConversationItems(ctx, "", id, responses.Page{})
	require.NoError(t, err)
	assert.Contains(t, string(list), `"first_id":"msg_o1"`, "a failed answer is not appended")
	_, err = s.Response(ctx, "", "resp_2")
	assert.NoError(t, err, `"store" stays the request's own: the response is stored too`)

	for _, tc := range []struct {
		name, body string
		code       codes.Code
		msg        string
	}{
		{"both", `{"input":"x","conversation":"` + id + `","previous_response_id":"resp_1"}`, codes.InvalidArgument, "mutually exclusive"},
		{"not an id", `{"input":"x","conversation":7}`, codes.InvalidArgument, `"conversation" must be an id or {"id": id}`},
		{"object without id", `{"input":"x","conversation":{}}`, codes.InvalidArgument, `"conversation" must be an id`},
		{"missing", `{"input":"x","conversation":"conv_none"}`, codes.NotFound, "Conversation with id 'conv_none' not found."},
	} {
		_, _, err := begin(t, s, "", tc.body)
		assert.Equal(t, tc.code, status.Code(err), tc.name)
		assert.Contains(t, status.Convert(err).Message(), tc.msg, tc.name)
	}
}

// TestConversationConcurrentAppends: turns and adds landing on one
// conversation at once all land, on either backend.
func TestConversationConcurrentAppends(t *testing.T) {
	t.Parallel()
	for name, s := range conversationStores(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			created, err := s.CreateConversation(ctx, "", nil)
			require.NoError(t, err)
			id := convID(t, created)
			const n = 8
			var wg sync.WaitGroup
			errs := make(chan error, 2*n)
			for i := range n {
				wg.Go(func() {
					_, err := s.AddConversationItems(ctx, "", id, fmt.Appendf(nil, `{"items":[{"id":"msg_add%d","role":"user","content":"x"}]}`, i))
					errs <- err
				})
				wg.Go(func() {
					turn, _, err := begin(t, s, "", fmt.Sprintf(`{"input":[{"id":"msg_in%d","role":"user","content":"y"}],"conversation":"%s","store":false}`, i, id))
					if err == nil {
						finish(t, turn, fmt.Sprintf(`{"id":"resp_%d","output":[{"id":"msg_out%d","type":"message"}]}`, i, i))
					}
					errs <- err
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				require.NoError(t, err)
			}
			list, err := s.ConversationItems(ctx, "", id, responses.Page{Limit: 100})
			require.NoError(t, err)
			for i := range n {
				for _, item := range []string{"msg_add%d", "msg_in%d", "msg_out%d"} {
					assert.Contains(t, string(list), `"id":"`+fmt.Sprintf(item, i)+`"`)
				}
			}
		})
	}
}

// TestConversationStoreUnavailable: with the store not answering, every
// conversation route and a turn continuing a conversation get
// UNAVAILABLE (503), never a silent answer.
func TestConversationStoreUnavailable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for name, call := range map[string]func(s *responses.Store) error{
		"create": func(s *responses.Store) error { _, err := s.CreateConversation(ctx, "", nil); return err },
		"get":    func(s *responses.Store) error { _, err := s.Conversation(ctx, "", "conv_1"); return err },
		"update": func(s *responses.Store) error {
			_, err := s.UpdateConversation(ctx, "", "conv_1", []byte(`{"metadata":{}}`))
			return err
		},
		"delete": func(s *responses.Store) error { _, err := s.DeleteConversation(ctx, "", "conv_1"); return err },
		"list": func(s *responses.Store) error {
			_, err := s.ConversationItems(ctx, "", "conv_1", responses.Page{})
			return err
		},
		"add": func(s *responses.Store) error {
			_, err := s.AddConversationItems(ctx, "", "conv_1", []byte(`{"items":[{"role":"user","content":"x"}]}`))
			return err
		},
		"get item": func(s *responses.Store) error { _, err := s.ConversationItem(ctx, "", "conv_1", "msg_1"); return err },
		"delete item": func(s *responses.Store) error {
			_, err := s.DeleteConversationItem(ctx, "", "conv_1", "msg_1")
			return err
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			err := call(downStore(t))
			assert.Equal(t, codes.Unavailable, status.Code(err), "%v", err)
		})
	}
	t.Run("turn", func(t *testing.T) {
		t.Parallel()
		_, _, err := begin(t, downStore(t), "", `{"input":"hi","store":false,"conversation":"conv_1"}`)
		assert.Equal(t, codes.Unavailable, status.Code(err))
		assert.Equal(t, `"conversation" needs the response store, which is unavailable`, status.Convert(err).Message())
	})
}

// downStore is a Store over a Redis that does not answer, a client of its
// own (few enough failed dials that go-redis starts no background redial).
func downStore(t *testing.T) *responses.Store {
	t.Helper()
	rd, err := responsestore.NewRedis(responsestore.RedisOptions{URL: "redis://127.0.0.1:1", MaxBytes: 1 << 20, Timeout: time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { _ = rd.Close() })
	return responses.NewStore(rd, "redis", responses.Options{TTL: time.Hour, MaxHistoryBytes: 1 << 20}, metrics.New().NewResponseStore())
}
