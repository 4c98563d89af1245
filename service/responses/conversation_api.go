package responses

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/coordinator-project/coordinator/internal/jsonbody"
	"github.com/coordinator-project/coordinator/internal/responsestore"
)

// The OpenAI Conversations API on the store. Each method takes the
// tenant (Tenant) and answers OpenAI's JSON; errors are gRPC statuses:
// InvalidArgument for a body OpenAI would refuse, NotFound alike for a
// conversation never stored, expired, deleted or another tenant's,
// Unavailable when the store does not answer.

// Metadata bounds, OpenAI's.
const (
	maxMetadataKeys     = 16
	maxMetadataKeyLen   = 64
	maxMetadataValueLen = 512
)

// CreateConversation creates a conversation of body ({"items"?: [...] (at
// most 20), "metadata"?: {...}}; empty is {}) and answers its object.
func (s *Store) CreateConversation(ctx context.Context, tenant string, body []byte) ([]byte, error) {
	obj, err := parseBody(body)
	if err != nil {
		return nil, err
	}
	metadata, err := metadataOf(obj, false)
	if err != nil {
		return nil, err
	}
	items := []byte("[]")
	if raw, ok := obj.Get("items"); ok && !jsonbody.IsNull(raw) {
		if items, err = itemsArg(raw); err != nil {
			return nil, err
		}
	}
	id := responsestore.NewID("conv")
	c := conversation{object: newConversationObject(id, s.now().Unix(), metadata), items: []byte("[]"), ids: []byte("[]")}
	c = c.withItems(items)
	if err := s.put(ctx, convKey(tenant, id), appendConversation(nil, c)); err != nil {
		if isTooLarge(err) {
			return nil, status.Error(codes.InvalidArgument, "conversation larger than responses.store.max_bytes")
		}
		return nil, lookupStatus(err, convNotFound(id))
	}
	return c.object, nil
}

// Conversation answers tenant's conversation id's object.
func (s *Store) Conversation(ctx context.Context, tenant, id string) ([]byte, error) {
	c, err := s.loadConversation(ctx, tenant, id)
	return c.object, err
}

// UpdateConversation replaces the metadata of tenant's conversation id
// with body's ({"metadata": {...}}, required) and answers its object.
func (s *Store) UpdateConversation(ctx context.Context, tenant, id string, body []byte) ([]byte, error) {
	obj, err := parseBody(body)
	if err != nil {
		return nil, err
	}
	metadata, err := metadataOf(obj, true)
	if err != nil {
		return nil, err
	}
	c, err := s.updateConversation(ctx, tenant, id, "", func(c conversation) (conversation, error) {
		o, err := jsonbody.ParseObject(c.object)
		if err != nil {
			return c, err
		}
		o.Set("metadata", metadata)
		c.object = o.Bytes()
		return c, nil
	})
	return c.object, err
}

// DeleteConversation deletes tenant's conversation id and its items and
// answers {"id":…,"object":"conversation.deleted","deleted":true}.
func (s *Store) DeleteConversation(ctx context.Context, tenant, id string) ([]byte, error) {
	if err := s.remove(ctx, convKey(tenant, id)); err != nil {
		return nil, lookupStatus(err, convNotFound(id))
	}
	b := append([]byte(nil), `{"id":`...)
	b = jsonbody.AppendString(b, id)
	return append(b, `,"object":"conversation.deleted","deleted":true}`...), nil
}

// ConversationItems is a page of tenant's conversation id's items, listed
// as a response's input items are (InputItems).
func (s *Store) ConversationItems(ctx context.Context, tenant, id string, p Page) ([]byte, error) {
	p, err := p.checked()
	if err != nil {
		return nil, err
	}
	c, err := s.loadConversation(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	items, ids, err := c.list()
	if err != nil {
		return nil, status.Errorf(codes.Internal, "stored conversation %s: %v", id, err)
	}
	return appendPage(nil, items, ids, p)
}

// AddConversationItems appends body's items ({"items": [...]}, 1..20) to
// tenant's conversation id and answers the list of the items added, each
// with its id, oldest first.
func (s *Store) AddConversationItems(ctx context.Context, tenant, id string, body []byte) ([]byte, error) {
	obj, err := parseBody(body)
	if err != nil {
		return nil, err
	}
	raw, ok := obj.Get("items")
	if !ok || jsonbody.IsNull(raw) {
		return nil, status.Error(codes.InvalidArgument, `"items" is required`)
	}
	items, err := itemsArg(raw)
	if err != nil {
		return nil, err
	}
	var added conversation
	_, err = s.updateConversation(ctx, tenant, id, "", func(c conversation) (conversation, error) {
		added = conversation{items: []byte("[]"), ids: []byte("[]")}.withItems(items)
		c.items = concatArrays(make([]byte, 0, len(c.items)+len(items)+1), c.items, added.items)
		c.ids = concatArrays(make([]byte, 0, len(c.ids)+len(added.ids)+1), c.ids, added.ids)
		return c, nil
	})
	if err != nil {
		return nil, err
	}
	list, ids, err := added.list()
	if err != nil {
		return nil, status.Errorf(codes.Internal, "conversation items: %v", err)
	}
	return appendPage(nil, list, ids, Page{Limit: len(list), Order: "asc"})
}

// ConversationItem answers the item item of tenant's conversation id,
// with its id.
func (s *Store) ConversationItem(ctx context.Context, tenant, id, item string) ([]byte, error) {
	c, err := s.loadConversation(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	items, ids, err := c.list()
	if err != nil {
		return nil, status.Errorf(codes.Internal, "stored conversation %s: %v", id, err)
	}
	for i, got := range ids {
		if got == item {
			return appendWithID(nil, items[i], got), nil
		}
	}
	return nil, status.Error(codes.NotFound, itemNotFound(item))
}

// DeleteConversationItem removes the item item of tenant's conversation
// id and answers the conversation's object.
func (s *Store) DeleteConversationItem(ctx context.Context, tenant, id, item string) ([]byte, error) {
	c, err := s.updateConversation(ctx, tenant, id, item, func(c conversation) (conversation, error) {
		items, ids, err := c.list()
		if err != nil {
			return c, err
		}
		for i, got := range ids {
			if got == item {
				return c.without(items, ids, i), nil
			}
		}
		return c, errItemNotFound
	})
	return c.object, err
}

// without is c without its item i (items and ids its parsed lists).
func (c conversation) without(items [][]byte, ids []string, i int) conversation {
	c.items, c.ids = []byte{'['}, []byte{'['}
	first := true
	for k := range items {
		if k == i {
			continue
		}
		if !first {
			c.items, c.ids = append(c.items, ','), append(c.ids, ',')
		}
		c.items = append(c.items, items[k]...)
		c.ids = jsonbody.AppendString(c.ids, ids[k])
		first = false
	}
	c.items, c.ids = append(c.items, ']'), append(c.ids, ']')
	return c
}

// parseBody is a request body as an object; empty is {}.
func parseBody(body []byte) (*jsonbody.Object, error) {
	if len(body) == 0 {
		body = []byte("{}")
	}
	obj, err := jsonbody.ParseObject(body)
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "body: %v", err)
	}
	return obj, nil
}

// metadataOf is body's "metadata", checked as OpenAI bounds it (at most 16
// string values, keys up to 64 bytes, values up to 512); absent or null
// is {} unless required.
func metadataOf(obj *jsonbody.Object, required bool) ([]byte, error) {
	raw, ok := obj.Get("metadata")
	if !ok || jsonbody.IsNull(raw) {
		if required {
			return nil, status.Error(codes.InvalidArgument, `"metadata" is required`)
		}
		return []byte("{}"), nil
	}
	m, err := jsonbody.ParseObject(raw)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, `"metadata" must be an object of strings`)
	}
	keys := m.Keys()
	if len(keys) > maxMetadataKeys {
		return nil, status.Errorf(codes.InvalidArgument, `"metadata": at most %d keys, got %d`, maxMetadataKeys, len(keys))
	}
	for _, k := range keys {
		v, ok := m.String(k)
		switch {
		case !ok:
			return nil, status.Errorf(codes.InvalidArgument, `"metadata.%s" must be a string`, k)
		case len(k) > maxMetadataKeyLen:
			return nil, status.Errorf(codes.InvalidArgument, `"metadata": a key longer than %d bytes`, maxMetadataKeyLen)
		case len(v) > maxMetadataValueLen:
			return nil, status.Errorf(codes.InvalidArgument, `"metadata.%s": longer than %d bytes`, k, maxMetadataValueLen)
		}
	}
	return raw, nil
}

// itemsArg is an "items" argument checked: an array of 1..20 objects.
func itemsArg(raw []byte) ([]byte, error) {
	n := 0
	err := jsonbody.EachElement(raw, func(i int, item []byte) error {
		n++
		if len(item) == 0 || item[0] != '{' {
			return status.Errorf(codes.InvalidArgument, `"items[%d]" must be an object`, i)
		}
		return nil
	})
	if err != nil {
		if _, ok := status.FromError(err); ok {
			return nil, err
		}
		return nil, status.Error(codes.InvalidArgument, `"items" must be an array of objects`)
	}
	if n > maxAddedItems {
		return nil, status.Errorf(codes.InvalidArgument, `"items": at most %d items at a time, got %d`, maxAddedItems, n)
	}
	return raw, nil
}
