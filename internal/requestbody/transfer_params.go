package requestbody

import (
	"github.com/coordinator-project/coordinator/internal/jsonbody"
	"github.com/coordinator-project/coordinator/internal/wire/bodykeys"
)

// The transfer params are the coordinator's (compat D23): the KV and EC
// connectors write them on the legs, and a worker trusts what it finds
// there (with NIXL, the host it pulls KV blocks from and their ids). A
// client's own values would reach the legs that no prefill or encode ran
// for, so the service removes them from the document before any step.

// transferKeys are the members a connector writes.
var transferKeys = [...]string{bodykeys.KVTransferParams, bodykeys.ECTransferParams}

// transferParents are the objects a vLLM worker reads transfer params
// from besides the body's top level: vllm_xargs (chat, completions,
// responses), which vLLM copies into the sampling params' extra_args, and
// the generate body's sampling_params.extra_args, where the legs write
// them.
var transferParents = [...][]string{
	{bodykeys.VLLMXargs},
	{bodykeys.SamplingParams, bodykeys.ExtraArgs},
}

// DropTransferParams removes from the document every transfer param the
// client set where a worker would read one (see DropTransferParams).
func (d *Document) DropTransferParams() []string { return DropTransferParams(d.root) }

// DropTransferParams removes from body, a request's JSON object, every
// transfer param set where a worker would read one (transferKeys at the
// top level and under transferParents), and returns the dotted paths it
// removed: nil, without allocating, when there were none. Names match
// without regard to case ("KV_TRANSFER_PARAMS", "Vllm_Xargs"): a worker
// written in Go decodes them so. A parent that is not an object is left
// as it is: no worker reads params from it.
func DropTransferParams(body *jsonbody.Object) []string {
	dropped := dropTransferKeys(body, "", nil)
	for _, path := range transferParents {
		dropped = dropTransferKeysUnder(body, path, "", dropped)
	}
	return dropped
}

// dropTransferKeys removes transferKeys, in any case, from o, appending
// each name it removed, prefixed with at, to dropped.
func dropTransferKeys(o *jsonbody.Object, at string, dropped []string) []string {
	for _, k := range transferKeys {
		for _, name := range o.NamesFold(k) {
			o.Delete(name)
			dropped = append(dropped, at+name)
		}
	}
	return dropped
}

// dropTransferKeysUnder removes transferKeys from the objects at path
// below o, each step of the path matched in any case.
func dropTransferKeysUnder(o *jsonbody.Object, path []string, at string, dropped []string) []string {
	if len(path) == 0 {
		return dropTransferKeys(o, at, dropped)
	}
	for _, name := range o.NamesFold(path[0]) {
		dropped = dropTransferKeysIn(o, name, path[1:], at, dropped)
	}
	return dropped
}

// dropTransferKeysIn removes transferKeys from the object at o[key] and
// path below it. The child is edited as a copy (its indexed one, else
// parsed from its text), put back in o only when something was removed, so
// a body without client params is not marked edited and is written as it
// came.
func dropTransferKeysIn(o *jsonbody.Object, key string, path []string, at string, dropped []string) []string {
	child := o.Object(key)
	if child != nil {
		child = child.Clone()
	} else {
		raw, _ := o.Get(key)
		var err error
		if child, err = jsonbody.ParseObject(raw); err != nil {
			return dropped
		}
	}
	n := len(dropped)
	dropped = dropTransferKeysUnder(child, path, at+key+".", dropped)
	if len(dropped) > n {
		o.SetObject(key, child)
	}
	return dropped
}
