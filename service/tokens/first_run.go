package tokens

import (
	"bytes"
	"strconv"

	"github.com/coordinator-project/coordinator/internal/jsonbody"
)

// firstUsage is what the usage of a continued answer takes of its first
// run's: the client's prompt (prompt_tokens and the raw
// prompt_tokens_details). One policy for every continued REST answer
// (generate, chat, completions): the whole answer's usage is the client's
// prompt and every output token.
type firstUsage struct {
	set     bool
	prompt  uint64
	details []byte // nil: the first run's usage had none
}

// keep takes the first run's usage (prompt tokens, its usage object),
// once.
func (f *firstUsage) keep(prompt uint32, usage *jsonbody.Object) {
	if f.set {
		return
	}
	f.set, f.prompt = true, uint64(prompt)
	if usage == nil {
		return
	}
	if raw, ok := usage.Get("prompt_tokens_details"); ok {
		f.details = bytes.Clone(raw)
	}
}

// rewrite makes usage, a continuation run's, the whole answer's with
// completion output tokens; nothing before keep.
func (f *firstUsage) rewrite(usage *jsonbody.Object, completion uint64) {
	if usage == nil || !f.set {
		return
	}
	usage.Set("prompt_tokens", strconv.AppendUint(nil, f.prompt, 10))
	usage.Set("completion_tokens", strconv.AppendUint(nil, completion, 10))
	usage.Set("total_tokens", strconv.AppendUint(nil, f.prompt+completion, 10))
	if f.details != nil {
		usage.Set("prompt_tokens_details", f.details)
	} else {
		usage.Delete("prompt_tokens_details")
	}
}

// firstRun is what a continued chat or completion answer takes of its
// first run: its raw id and created, which the continuation's events carry
// (stamp), and its usage's prompt.
type firstRun struct {
	id, created []byte
	usage       firstUsage
}

// note takes in a first-run answer or event, data, of id, created and
// usage u, read with index.
func (f *firstRun) note(id, created []byte, u *generateUsage, data []byte, index *jsonbody.Index) {
	if f.id == nil && id != nil {
		f.id, f.created = id, created
	}
	if f.usage.set || u == nil {
		return
	}
	var usage *jsonbody.Object
	if root, err := jsonbody.ParseIndexed(data, index); err == nil {
		usage = root.Object("usage")
	}
	f.usage.keep(u.PromptTokens, usage)
}

// stamp gives root, a continuation's event, the first run's id and
// created.
func (f *firstRun) stamp(root *jsonbody.Object) {
	if f.id != nil {
		root.Set("id", f.id)
	}
	if f.created != nil {
		root.Set("created", f.created)
	}
}
