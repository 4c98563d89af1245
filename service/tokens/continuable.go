package tokens

import "github.com/coordinator-project/coordinator/internal/jsonbody"

// atMostOne reports whether obj[key] (n, best_of), when present and not
// null, is an integer of at most 1: one choice to continue.
func atMostOne(obj *jsonbody.Object, key string) bool {
	raw, ok := obj.Get(key)
	if !ok || jsonbody.IsNull(raw) {
		return true
	}
	v, ok := jsonbody.Int(raw)
	return ok && v <= 1
}

// budgetsReadable reports whether each of the budgets obj has
// (max_tokens, min_tokens, ...), when present and not null, is a number
// the continuation can lessen (lessOutput: 60, 60.0, 6e1). One that vLLM
// also reads in another spelling (pydantic takes "60" for 60) would reach
// the next run as the client sent it, the whole budget again: such a
// request is not continued.
func budgetsReadable(obj *jsonbody.Object, keys ...string) bool {
	for _, k := range keys {
		if raw, ok := obj.Get(k); ok && !jsonbody.IsNull(raw) {
			if _, ok := jsonbody.Int(raw); !ok {
				return false
			}
		}
	}
	return true
}
