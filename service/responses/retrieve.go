package responses

import (
	"context"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/coordinator-project/coordinator/internal/jsonbody"
	"github.com/coordinator-project/coordinator/internal/responsestore"
)

// notFound is the message of a lookup of id that found nothing: the same
// for an id never stored, expired, deleted or another tenant's.
func notFound(id string) string { return fmt.Sprintf("Response with id '%s' not found.", id) }

// load is the record of tenant's response id, or a gRPC status.
func (s *Store) load(ctx context.Context, tenant, id string) (record, error) {
	value, err := s.get(ctx, responsestore.Key{Tenant: tenant, Kind: kind, ID: id})
	if err != nil {
		return record{}, lookupStatus(err, notFound(id))
	}
	rec, err := parseRecord(value)
	if err != nil {
		return record{}, status.Errorf(codes.Internal, "stored response %s: %v", id, err)
	}
	return rec, nil
}

// Response is tenant's stored response id: the response object as the
// worker answered it. Errors are gRPC statuses (NotFound, Unavailable).
func (s *Store) Response(ctx context.Context, tenant, id string) ([]byte, error) {
	rec, err := s.load(ctx, tenant, id)
	return rec.response, err
}

// Delete removes tenant's stored response id and returns OpenAI's answer,
// {"id":…,"object":"response","deleted":true}. Errors are gRPC statuses.
func (s *Store) Delete(ctx context.Context, tenant, id string) ([]byte, error) {
	if err := s.remove(ctx, responsestore.Key{Tenant: tenant, Kind: kind, ID: id}); err != nil {
		return nil, lookupStatus(err, notFound(id))
	}
	b := append([]byte(nil), `{"id":`...)
	b = jsonbody.AppendString(b, id)
	return append(b, `,"object":"response","deleted":true}`...), nil
}

// Page selects input items: at most Limit (1..100; 0 is 20), in Order
// ("asc" or "desc", the default), after the item with id After ("" from
// the first).
type Page struct {
	Limit int
	Order string
	After string
}

// InputItems is a page of the input items of tenant's stored response id
// as OpenAI lists them: {"object":"list","data":[...],"first_id",
// "last_id","has_more"}, each item with its id (one the coordinator gave
// it when it had none). Errors are gRPC statuses.
func (s *Store) InputItems(ctx context.Context, tenant, id string, p Page) ([]byte, error) {
	p, err := p.checked()
	if err != nil {
		return nil, err
	}
	rec, err := s.load(ctx, tenant, id)
	if err != nil {
		return nil, err
	}
	items, err := jsonbody.ParseArray(rec.input)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "stored response %s: input: %v", id, err)
	}
	ids, err := idsOf(rec.ids, len(items))
	if err != nil {
		return nil, status.Errorf(codes.Internal, "stored response %s: %v", id, err)
	}
	return appendPage(nil, items, ids, p)
}

// checked is p with its defaults (limit 20, order desc), or
// InvalidArgument.
func (p Page) checked() (Page, error) {
	if p.Limit == 0 {
		p.Limit = 20
	}
	if p.Limit < 1 || p.Limit > 100 {
		return p, status.Errorf(codes.InvalidArgument, "limit: must be in 1..100, got %d", p.Limit)
	}
	if p.Order == "" {
		p.Order = "desc"
	}
	if p.Order != "asc" && p.Order != "desc" {
		return p, status.Errorf(codes.InvalidArgument, `order: must be "asc" or "desc", got %q`, p.Order)
	}
	return p, nil
}

// idsOf reads the record's ids, n of them.
func idsOf(raw []byte, n int) ([]string, error) {
	elems, err := jsonbody.ParseArray(raw)
	if err != nil || len(elems) != n {
		return nil, fmt.Errorf("ids: %d for %d items", len(elems), n)
	}
	ids := make([]string, n)
	for i, e := range elems {
		ids[i], _ = jsonbody.String(e)
	}
	return ids, nil
}

// appendPage appends the list of the page p of items (ids parallel).
func appendPage(dst []byte, items [][]byte, ids []string, p Page) ([]byte, error) {
	order := make([]int, len(items))
	for i := range order {
		order[i] = i
		if p.Order == "desc" {
			order[i] = len(items) - 1 - i
		}
	}
	start := 0
	if p.After != "" {
		start = -1
		for k, i := range order {
			if ids[i] == p.After {
				start = k + 1
				break
			}
		}
		if start < 0 {
			return nil, status.Errorf(codes.InvalidArgument, "after: no item with id '%s'", p.After)
		}
	}
	end := min(start+p.Limit, len(order))
	dst = append(dst, `{"object":"list","data":[`...)
	for k, i := range order[start:end] {
		if k > 0 {
			dst = append(dst, ',')
		}
		dst = appendWithID(dst, items[i], ids[i])
	}
	dst = append(dst, `],"first_id":`...)
	dst = appendIDAt(dst, ids, order, start, end > start)
	dst = append(dst, `,"last_id":`...)
	dst = appendIDAt(dst, ids, order, end-1, end > start)
	dst = append(dst, `,"has_more":`...)
	if end < len(order) {
		dst = append(dst, "true"...)
	} else {
		dst = append(dst, "false"...)
	}
	return append(dst, '}'), nil
}

func appendIDAt(dst []byte, ids []string, order []int, k int, ok bool) []byte {
	if !ok {
		return append(dst, "null"...)
	}
	return jsonbody.AppendString(dst, ids[order[k]])
}

// appendWithID appends item with "id" first when it has none of its own
// (one that is not a non-empty string is replaced where it stands).
func appendWithID(dst, item []byte, id string) []byte {
	if _, ok := itemID(item); ok {
		return append(dst, item...)
	}
	if obj, err := jsonbody.ParseObject(item); err == nil {
		if _, has := obj.Get("id"); has {
			obj.Set("id", jsonbody.AppendString(nil, id))
			return obj.AppendTo(dst)
		}
	}
	dst = append(dst, `{"id":`...)
	dst = jsonbody.AppendString(dst, id)
	rest := innerOf(item)
	if len(rest) > 0 {
		dst = append(dst, ',')
		dst = append(dst, rest...)
	}
	return append(dst, '}')
}
