package responses

import (
	"context"
	"fmt"
	"log/slog"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/coordinator-project/coordinator/internal/jsonbody"
	"github.com/coordinator-project/coordinator/internal/responsestore"
	"github.com/coordinator-project/coordinator/internal/wire/bodykeys"
	"github.com/coordinator-project/coordinator/internal/wire/legs"
)

// previousKey is the request member naming the response a request continues.
const previousKey = "previous_response_id"

// Turn is one Responses request's part in the store: whether its answer is
// kept, for which tenant, with the input items its legs got.
type Turn struct {
	store  *Store
	tenant string
	// keep: the request's "store" is true (sent, or absent and
	// responses.store_by_default).
	keep bool
	// input is the request's input as a JSON array of items: the history
	// of the response it continues, then its own items (a string input as
	// one user message).
	input []byte
	// answer is the response object the worker answered with, once it came
	// (Sink).
	answer []byte
}

// Begin reads root, a checked Responses body sent by tenant: its "store"
// and "previous_response_id". Continuing a response, it rebuilds the
// body's input as that response's input items, its output items and the
// body's own input (instructions are not carried over, as OpenAI says),
// and removes previous_response_id: every step and leg sees the whole
// conversation. It reports whether it edited root. The Turn is nil when
// the request neither stores nor continues a response.
//
// Errors are gRPC statuses: InvalidArgument for a "store" that is not a
// flag, a previous_response_id that is not a string, or a history past
// responses.max_history_bytes; NotFound for a response that is not stored
// (or another tenant's: the same answer); Unavailable when the store is
// known down.
func (s *Store) Begin(ctx context.Context, root *jsonbody.Object, tenant string) (*Turn, bool, error) {
	keep, err := s.keep(root)
	if err != nil {
		return nil, false, status.Error(codes.InvalidArgument, err.Error())
	}
	prev, err := previousID(root)
	if err != nil {
		return nil, false, status.Error(codes.InvalidArgument, err.Error())
	}
	if !keep && prev == "" {
		return nil, false, nil
	}
	if err := s.Ready(ctx); err != nil {
		what := `"store": true`
		if prev != "" {
			what = `"previous_response_id"`
		}
		return nil, false, status.Errorf(codes.Unavailable, "%s needs the response store, which is unavailable", what)
	}
	raw, _ := root.Get(bodykeys.Input)
	t := &Turn{store: s, tenant: tenant, keep: keep, input: itemsOf(raw)}
	if prev == "" {
		return t, false, nil
	}
	if t.input, err = s.history(ctx, tenant, prev, t.input); err != nil {
		return nil, false, err
	}
	root.Set(bodykeys.Input, t.input)
	root.Delete(previousKey)
	return t, true, nil
}

// keep reads "store" as vLLM reads a flag; absent or null, it is
// responses.store_by_default.
func (s *Store) keep(root *jsonbody.Object) (bool, error) {
	raw, ok := root.Get(bodykeys.Store)
	if !ok || jsonbody.IsNull(raw) {
		return s.opts.StoreByDefault, nil
	}
	return legs.Flag(root, bodykeys.Store)
}

// previousID is the body's previous_response_id, "" when absent or null.
func previousID(root *jsonbody.Object) (string, error) {
	raw, ok := root.Get(previousKey)
	if !ok || jsonbody.IsNull(raw) {
		return "", nil
	}
	id, ok := jsonbody.String(raw)
	if !ok || id == "" {
		return "", legs.Invalidf(`"previous_response_id" must be a non-empty string`)
	}
	return id, nil
}

// history is the input that continues the response prev: its input items,
// its output items, then items; within responses.max_history_bytes.
func (s *Store) history(ctx context.Context, tenant, prev string, items []byte) ([]byte, error) {
	value, err := s.get(ctx, responsestore.Key{Tenant: tenant, Kind: kind, ID: prev})
	if err != nil {
		return nil, lookupStatus(err, fmt.Sprintf("Previous response with id '%s' not found.", prev))
	}
	rec, err := parseRecord(value)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "stored response %s: %v", prev, err)
	}
	n := len(rec.input) + len(rec.output) + len(items)
	if int64(n) > s.opts.MaxHistoryBytes {
		return nil, status.Errorf(codes.InvalidArgument,
			`"previous_response_id": the conversation's input is %d bytes, past responses.max_history_bytes (%d)`, n, s.opts.MaxHistoryBytes)
	}
	return concatArrays(make([]byte, 0, n), rec.input, rec.output, items), nil
}

// lookupStatus is the status of a failed lookup: NotFound with notFound,
// Unavailable, or Internal.
func lookupStatus(err error, notFound string) error {
	switch {
	case isNotFound(err):
		return status.Error(codes.NotFound, notFound)
	case isUnavailable(err):
		return status.Error(codes.Unavailable, "the response store is unavailable")
	case ctxErr(err):
		return status.FromContextError(err).Err()
	}
	return status.Errorf(codes.Internal, "response store: %v", err)
}

// Keep reports whether the turn's answer is to be stored.
func (t *Turn) Keep() bool { return t != nil && t.keep }

// Finish stores the turn's answer, when the request asked for it and a
// whole response object came (a stream's terminal event: completed,
// incomplete or failed, with the status the worker gave it): an answer cut
// before it is not stored. The answer was sent already: a failed write is
// logged and counted, not the client's error. It writes even if ctx is
// cancelled (the client gone after the answer).
func (t *Turn) Finish(ctx context.Context, log *slog.Logger, requestID string) {
	if !t.Keep() || t.answer == nil {
		return
	}
	id, ok := responseID(t.answer)
	if !ok {
		log.WarnContext(ctx, "response not stored: the answer has no id", "request_id", requestID)
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
	defer cancel()
	value := appendRecord(nil, t.answer, t.input)
	if err := t.store.put(ctx, responsestore.Key{Tenant: t.tenant, Kind: kind, ID: id}, value); err != nil {
		log.WarnContext(ctx, "response not stored", "request_id", requestID, "response_id", id, "error", err)
	}
}
