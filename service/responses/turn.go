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
// kept, for which tenant, with the input items its legs got, and the
// conversation it continues.
type Turn struct {
	store  *Store
	tenant string
	// keep: the request's "store" is true (sent, or absent and
	// responses.store_by_default).
	keep bool
	// conversation is the id of the conversation the request continues
	// ("conversation"), "" for none: its items went before the input, and
	// the request's own items and the answer's output are appended to it.
	conversation string
	// input is the request's input as a JSON array of items: the history
	// of the response or conversation it continues, then its own items (a
	// string input as one user message).
	input []byte
	// own is the request's own input items, the end of input.
	own []byte
	// answer is the response object the worker answered with, once it came
	// (Sink).
	answer []byte
}

// Begin reads root, a checked Responses body sent by tenant: its "store",
// "previous_response_id" and "conversation". Continuing a response, it
// rebuilds the body's input as that response's input items, its output
// items and the body's own input (instructions are not carried over, as
// OpenAI says), and removes previous_response_id; continuing a
// conversation, as the conversation's items and the body's own input, and
// removes "conversation": every step and leg sees the whole conversation.
// It reports whether it edited root. The Turn is nil when the request
// neither stores nor continues anything.
//
// Errors are gRPC statuses: InvalidArgument for a "store" that is not a
// flag, a previous_response_id or conversation that is not an id, both of
// them, or a history past responses.max_history_bytes; NotFound for a
// response or conversation that is not stored (or another tenant's: the
// same answer); Unavailable when the store is known down.
func (s *Store) Begin(ctx context.Context, root *jsonbody.Object, tenant string) (*Turn, bool, error) {
	keep, err := s.keep(root)
	if err != nil {
		return nil, false, status.Error(codes.InvalidArgument, err.Error())
	}
	prev, conv, err := continued(root)
	if err != nil {
		return nil, false, status.Error(codes.InvalidArgument, err.Error())
	}
	if !keep && prev == "" && conv == "" {
		return nil, false, nil
	}
	if err := s.Ready(ctx); err != nil {
		return nil, false, status.Errorf(codes.Unavailable, "%s needs the response store, which is unavailable", needs(prev, conv))
	}
	raw, _ := root.Get(bodykeys.Input)
	t := &Turn{store: s, tenant: tenant, keep: keep, conversation: conv, input: itemsOf(raw)}
	t.own = t.input
	switch {
	case prev != "":
		t.input, err = s.history(ctx, tenant, prev, t.own)
		root.Delete(previousKey)
	case conv != "":
		t.input, err = s.conversationHistory(ctx, tenant, conv, t.own)
		root.Delete(conversationKey)
	default:
		return t, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	root.Set(bodykeys.Input, t.input)
	return t, true, nil
}

// needs names what of a request needs the store.
func needs(prev, conv string) string {
	switch {
	case prev != "":
		return `"previous_response_id"`
	case conv != "":
		return `"conversation"`
	}
	return `"store": true`
}

// continued is the body's previous_response_id and conversation id, at
// most one of them.
func continued(root *jsonbody.Object) (prev, conv string, err error) {
	if prev, err = previousID(root); err != nil {
		return "", "", err
	}
	if conv, err = conversationID(root); err != nil {
		return "", "", err
	}
	if prev != "" && conv != "" {
		return "", "", legs.Invalidf(`"previous_response_id" and "conversation" are mutually exclusive: send one`)
	}
	return prev, conv, nil
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
	if err := s.checkHistory(n, previousKey); err != nil {
		return nil, err
	}
	return concatArrays(make([]byte, 0, n), rec.input, rec.output, items), nil
}

// checkHistory bounds a rebuilt input of n bytes by
// responses.max_history_bytes; what names the member that rebuilt it.
func (s *Store) checkHistory(n int, what string) error {
	if int64(n) > s.opts.MaxHistoryBytes {
		return status.Errorf(codes.InvalidArgument,
			`"%s": the conversation's input is %d bytes, past responses.max_history_bytes (%d)`, what, n, s.opts.MaxHistoryBytes)
	}
	return nil
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

// capturing reports whether the turn needs the answer: to store it, or to
// append it to its conversation.
func (t *Turn) capturing() bool { return t != nil && (t.keep || t.conversation != "") }

// Finish stores the turn's answer, when the request asked for it and a
// whole response object came (a stream's terminal event: completed,
// incomplete or failed, with the status the worker gave it): an answer cut
// before it is not stored. Continuing a conversation, it appends the
// request's own input items and the answer's output items to it (not for
// a failed answer). The answer was sent already: a failed write is logged
// and counted, not the client's error. It writes even if ctx is cancelled
// (the client gone after the answer).
func (t *Turn) Finish(ctx context.Context, log *slog.Logger, requestID string) {
	if !t.capturing() || t.answer == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
	defer cancel()
	if t.conversation != "" {
		if err := t.appendToConversation(ctx); err != nil {
			log.WarnContext(ctx, "conversation not updated", "request_id", requestID, "conversation_id", t.conversation, "error", err)
		}
	}
	if !t.keep {
		return
	}
	id, ok := responseID(t.answer)
	if !ok {
		log.WarnContext(ctx, "response not stored: the answer has no id", "request_id", requestID)
		return
	}
	value := appendRecord(nil, t.answer, t.input)
	if err := t.store.put(ctx, responsestore.Key{Tenant: t.tenant, Kind: kind, ID: id}, value); err != nil {
		log.WarnContext(ctx, "response not stored", "request_id", requestID, "response_id", id, "error", err)
	}
}
