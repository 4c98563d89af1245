package sim

import "strconv"

// A completions prompt of token IDs that ends with the first k tokens of
// the completions output (a choice's output starts at [Sentence]'s first
// token: wordAt), as a client continuing an aborted completion sends it
// (the prompt and the output so far), goes on from token k, as a
// tokens-in request does from the output it is given back
// (continuationOf) and a chat from its final message (chatDone).
//
// With "return_token_ids": true a completions answer names its token IDs
// as vLLM does: each choice has token_ids (its output) and
// prompt_token_ids; a stream's chunks carry the new token_ids, the first
// chunk of a choice its prompt_token_ids.

// completionDone is how many tokens of its output a completions request
// gives back: the longest k (at most maxContinuation, less than the
// prompt) such that its token-ID prompt ends with the first k tokens of
// the output; 0 for a text prompt or an echo.
func (req *workerRequest) completionDone() int {
	if req.format != formatCompletions || req.Echo {
		return 0
	}
	return outputSuffix(req.promptIDs)
}

// outputSuffix is the longest k < len(prompt), at most maxContinuation,
// such that prompt ends with the first k output tokens; 0 when none.
func outputSuffix(prompt []uint32) int {
	n := len(prompt)
	done := 0
	for k := 1; k < n && k <= maxContinuation; k++ {
		if wordAt(k-1).id == prompt[n-1] && continues(prompt[n-k:], 0) {
			done = k
		}
	}
	return done
}

// completionTokenIDs is the token IDs of choice c's tokens [from, to).
func (g *generation) completionTokenIDs(c, from, to int) []uint32 {
	ids := make([]uint32, 0, max(to-from, 0))
	for i := from; i < to; i++ {
		ids = append(ids, g.word(c, i).id)
	}
	return ids
}

// appendCompletionTokenIDs appends, to the choice of a completions chunk
// of token i (id), its token_ids and on the first its prompt_token_ids,
// when the request asked for them.
func (g *generation) appendCompletionTokenIDs(b []byte, id uint32, i int) []byte {
	if !g.returnTokenIDs {
		return b
	}
	if i == 0 && g.prompt != nil {
		b = append(b, `,"prompt_token_ids":`...)
		b = appendIDs(b, g.prompt)
	}
	b = append(b, `,"token_ids":`...)
	return appendIDs(b, []uint32{id})
}

// appendIDs appends ids as a JSON array.
func appendIDs(b []byte, ids []uint32) []byte {
	b = append(b, '[')
	for k, id := range ids {
		if k > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendUint(b, uint64(id), 10)
	}
	return append(b, ']')
}
