package responses

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/coordinator-project/coordinator/internal/jsonbody"
	"github.com/coordinator-project/coordinator/internal/responsestore"
	"github.com/coordinator-project/coordinator/internal/wire/legs"
)

// conversationKind is the responsestore.Key kind of a conversation.
const conversationKind = "conversation"

// maxAddedItems bounds the items one create or add carries (OpenAI's 20).
const maxAddedItems = 20

// A conversation is one stored JSON value, its record:
//
//	{"conversation":{...},"items":[...],"ids":[...]}
//
// conversation: the object OpenAI answers ({"id","object":"conversation",
// "created_at","metadata"}); items: the conversation's items in order, as
// the legs got them (so a turn's rebuilt input is byte for byte the
// stateless one); ids: each item's id, its own or a new msg_ one, for the
// listing. Every change is one responsestore Update of the whole value, so
// two turns or adds of one conversation both land.
type conversation struct {
	object []byte // a JSON object
	items  []byte // a JSON array
	ids    []byte // a JSON array of strings, parallel to items
}

// errItemNotFound is an item lookup's miss inside an update.
var errItemNotFound = errors.New("item not found")

// convNotFound is the message of a conversation lookup of id that found
// nothing: the same for an id never stored, expired, deleted or another
// tenant's.
func convNotFound(id string) string { return fmt.Sprintf("Conversation with id '%s' not found.", id) }

func itemNotFound(id string) string { return fmt.Sprintf("Item with id '%s' not found.", id) }

func convKey(tenant, id string) responsestore.Key {
	return responsestore.Key{Tenant: tenant, Kind: conversationKind, ID: id}
}

// appendConversation appends the record of c.
func appendConversation(dst []byte, c conversation) []byte {
	dst = append(dst, `{"conversation":`...)
	dst = append(dst, c.object...)
	dst = append(dst, `,"items":`...)
	dst = append(dst, c.items...)
	dst = append(dst, `,"ids":`...)
	dst = append(dst, c.ids...)
	return append(dst, '}')
}

// parseConversation reads a stored conversation record.
func parseConversation(value []byte) (conversation, error) {
	obj, err := jsonbody.ParseObject(value)
	if err != nil {
		return conversation{}, err
	}
	var c conversation
	var ok bool
	if c.object, ok = obj.Get("conversation"); !ok {
		return c, errors.New("record: no conversation")
	}
	if c.items, ok = obj.Get("items"); !ok {
		return c, errors.New("record: no items")
	}
	if c.ids, ok = obj.Get("ids"); !ok {
		return c, errors.New("record: no ids")
	}
	return c, nil
}

// withItems is c with items appended, each with its own id or a new
// msg_ one.
func (c conversation) withItems(items []byte) conversation {
	ids := []byte{'['}
	_ = jsonbody.EachElement(items, func(i int, item []byte) error {
		if i > 0 {
			ids = append(ids, ',')
		}
		id, ok := itemID(item)
		if !ok {
			id = responsestore.NewID("msg")
		}
		ids = jsonbody.AppendString(ids, id)
		return nil
	})
	ids = append(ids, ']')
	c.items = concatArrays(make([]byte, 0, len(c.items)+len(items)+1), c.items, items)
	c.ids = concatArrays(make([]byte, 0, len(c.ids)+len(ids)+1), c.ids, ids)
	return c
}

// list is c's items and ids, parsed.
func (c conversation) list() ([][]byte, []string, error) {
	items, err := jsonbody.ParseArray(c.items)
	if err != nil {
		return nil, nil, fmt.Errorf("items: %w", err)
	}
	ids, err := idsOf(c.ids, len(items))
	return items, ids, err
}

// newConversationObject is the conversation object of a new id.
func newConversationObject(id string, createdAt int64, metadata []byte) []byte {
	b := append([]byte(nil), `{"id":`...)
	b = jsonbody.AppendString(b, id)
	b = append(b, `,"object":"conversation","created_at":`...)
	b = strconv.AppendInt(b, createdAt, 10)
	b = append(b, `,"metadata":`...)
	b = append(b, metadata...)
	return append(b, '}')
}

// loadConversation is tenant's conversation id, or a gRPC status.
func (s *Store) loadConversation(ctx context.Context, tenant, id string) (conversation, error) {
	value, err := s.get(ctx, convKey(tenant, id))
	if err != nil {
		return conversation{}, lookupStatus(err, convNotFound(id))
	}
	c, err := parseConversation(value)
	if err != nil {
		return conversation{}, status.Errorf(codes.Internal, "stored conversation %s: %v", id, err)
	}
	return c, nil
}

// updateConversation changes tenant's conversation id by fn, atomically
// (responsestore.Store.Update), and returns the new record. Errors are
// gRPC statuses: NotFound for a conversation (or, errItemNotFound, an
// item) that is not stored, InvalidArgument for one grown past
// responses.store.max_bytes, Unavailable.
func (s *Store) updateConversation(ctx context.Context, tenant, id, item string, fn func(conversation) (conversation, error)) (conversation, error) {
	var next conversation
	err := s.update(ctx, convKey(tenant, id), func(old []byte) ([]byte, error) {
		if old == nil {
			return nil, responsestore.ErrNotFound
		}
		c, err := parseConversation(old)
		if err != nil {
			return nil, fmt.Errorf("stored conversation %s: %w", id, err)
		}
		if next, err = fn(c); err != nil {
			return nil, err
		}
		return appendConversation(nil, next), nil
	})
	switch {
	case err == nil:
		return next, nil
	case errors.Is(err, errItemNotFound):
		return next, status.Error(codes.NotFound, itemNotFound(item))
	case errors.Is(err, responsestore.ErrTooLarge):
		return next, status.Errorf(codes.InvalidArgument, "conversation %s would be larger than responses.store.max_bytes", id)
	case errors.Is(err, responsestore.ErrContended):
		return next, status.Errorf(codes.Unavailable, "conversation %s is being changed by other requests: retry", id)
	}
	return next, lookupStatus(err, convNotFound(id))
}

// conversationKey is the request member naming the conversation a
// Responses request continues.
const conversationKey = "conversation"

// conversationID is the body's conversation id ("conversation": "conv_…"
// or {"id": "conv_…"}), "" when absent or null.
func conversationID(root *jsonbody.Object) (string, error) {
	raw, ok := root.Get(conversationKey)
	if !ok || jsonbody.IsNull(raw) {
		return "", nil
	}
	if raw[0] == '{' {
		obj, err := jsonbody.ParseObject(raw)
		if err != nil {
			return "", legs.Invalidf(`"conversation" must be an id or {"id": id}`)
		}
		raw, _ = obj.Get("id")
	}
	id, ok := jsonbody.String(raw)
	if !ok || id == "" {
		return "", legs.Invalidf(`"conversation" must be an id or {"id": id}`)
	}
	return id, nil
}

// conversationHistory is the input that continues tenant's conversation
// id: its items, then items; within responses.max_history_bytes.
func (s *Store) conversationHistory(ctx context.Context, tenant, id string, items []byte) ([]byte, error) {
	c, err := s.loadConversation(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	n := len(c.items) + len(items)
	if err := s.checkHistory(n, conversationKey); err != nil {
		return nil, err
	}
	return concatArrays(make([]byte, 0, n), c.items, items), nil
}

// appendToConversation appends the turn's own input items and its
// answer's output items to its conversation, unless the answer failed.
func (t *Turn) appendToConversation(ctx context.Context) error {
	resp, err := jsonbody.ParseObject(t.answer)
	if err != nil {
		return fmt.Errorf("answer: %w", err)
	}
	if st, _ := resp.String("status"); st == "failed" {
		return nil
	}
	output, ok := resp.Get("output")
	if !ok || output[0] != '[' {
		output = []byte("[]")
	}
	_, err = t.store.updateConversation(ctx, t.tenant, t.conversation, "", func(c conversation) (conversation, error) {
		return c.withItems(concatArrays(make([]byte, 0, len(t.own)+len(output)+1), t.own, output)), nil
	})
	return err
}
