package sim

import "encoding/binary"

// Sentence is the text the workers generate, repeated to length. Each of its
// tokens is one cl100k_base token (a word with its leading space, or the
// final period).
const Sentence = "This answer was streamed by the coordinator simulator through the full pipeline."

// sentenceToken is one cl100k_base token of [Sentence].
type sentenceToken struct {
	id   uint32
	text string
	json string // text as a JSON string literal
}

// sentenceTokens is [Sentence] in cl100k_base (checked against the tokenizer
// by the tests). Repetitions start with againToken (" This").
var sentenceTokens = [...]sentenceToken{
	{2028, "This", `"This"`},
	{4320, " answer", `" answer"`},
	{574, " was", `" was"`},
	{74345, " streamed", `" streamed"`},
	{555, " by", `" by"`},
	{279, " the", `" the"`},
	{31384, " coordinator", `" coordinator"`},
	{42991, " simulator", `" simulator"`},
	{1555, " through", `" through"`},
	{279, " the", `" the"`},
	{2539, " full", `" full"`},
	{15660, " pipeline", `" pipeline"`},
	{13, ".", `"."`},
}

var againToken = sentenceToken{1115, " This", `" This"`}

// wordAt is the i-th token of the endless repetition of [Sentence].
func wordAt(i int) sentenceToken {
	j := i % len(sentenceTokens)
	if j == 0 && i > 0 {
		return againToken
	}
	return sentenceTokens[j]
}

// CompletionTokens returns the n token IDs the workers generate for choice
// `choice` of a tokens-in request with this prompt: [Sentence] repeated,
// starting at a token chosen by hashing the prompt and the choice. The IDs
// decode with cl100k_base to English words. A shorter n yields a prefix of a
// longer one.
func CompletionTokens(prompt []uint32, n, choice int) []uint32 {
	if n <= 0 {
		return []uint32{}
	}
	start := completionStart(prompt, choice)
	ids := make([]uint32, n)
	for i := range ids {
		ids[i] = wordAt(start + i).id
	}
	return ids
}

// completionStart is the position in the repeated sentence where the output
// for this prompt and choice begins.
func completionStart(prompt []uint32, choice int) int {
	return int(promptHash(prompt, uint64(choice), 0) % uint64(len(sentenceTokens)))
}

// TokenLogprob returns the log probability of the token generated at
// `position` of choice `choice` for this prompt: deterministic, in
// (-2.01, -0.01].
func TokenLogprob(prompt []uint32, choice, position int) float32 {
	return float32(tokenLogprob64(prompt, choice, position))
}

// tokenLogprob64 keeps three decimals exact until the final float32
// conversion, so JSON shows -1.695 rather than -1.6949999.
func tokenLogprob64(prompt []uint32, choice, position int) float64 {
	h := promptHash(prompt, uint64(choice), uint64(position)+1)
	return -0.01 - float64(h%2000)/1000
}

// Logprob is one entry of a top-k list: a token and its log probability.
type Logprob struct {
	TokenID uint32
	Logprob float32
}

// TopLogprobs returns the k most likely tokens at `position` of choice
// `choice` for this prompt, most likely first. The first is the generated
// token (CompletionTokens(prompt, position+1, choice)[position]) with
// [TokenLogprob]; the others are distinct, deterministic tokens with strictly
// lower log probabilities.
func TopLogprobs(prompt []uint32, choice, position, k int) []Logprob {
	return topLogprobs(prompt, choice, position, k, wordAt(completionStart(prompt, choice)+position).id)
}

// topLogprobs is TopLogprobs with the generated token given (chat and
// completions choices do not start where a tokens-in one does).
func topLogprobs(prompt []uint32, choice, position, k int, chosen uint32) []Logprob {
	if k <= 0 {
		return []Logprob{}
	}
	lp := tokenLogprob64(prompt, choice, position)
	out := make([]Logprob, 0, k)
	out = append(out, Logprob{TokenID: chosen, Logprob: float32(lp)})
	for i := 1; len(out) < k; i++ {
		h := promptHash(prompt, uint64(choice), uint64(position)+1, uint64(i))
		id := uint32(h % 100_000)
		if id == chosen || containsToken(out, id) {
			continue
		}
		lp -= 0.25 + float64(h>>40%500)/1000
		out = append(out, Logprob{TokenID: id, Logprob: float32(lp)})
	}
	return out
}

func containsToken(l []Logprob, id uint32) bool {
	for _, e := range l {
		if e.TokenID == id {
			return true
		}
	}
	return false
}

// promptHash is FNV-1a over the prompt and the extra values, finished with a
// splitmix64 step so every bit depends on every input.
func promptHash(prompt []uint32, extra ...uint64) uint64 {
	return finishHash(fnvIDs(fnvOffset, prompt), extra...)
}

const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

// fnvIDs goes on with the FNV-1a state h over ids.
func fnvIDs(h uint64, ids []uint32) uint64 {
	var buf [4]byte
	for _, id := range ids {
		binary.LittleEndian.PutUint32(buf[:], id)
		for _, b := range buf {
			h = (h ^ uint64(b)) * fnvPrime
		}
	}
	return h
}

// finishHash hashes the extra values into the FNV-1a state h and mixes it.
func finishHash(h uint64, extra ...uint64) uint64 {
	var buf [8]byte
	for _, x := range extra {
		binary.LittleEndian.PutUint64(buf[:], x)
		for _, b := range buf {
			h = (h ^ uint64(b)) * fnvPrime
		}
	}
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	h ^= h >> 31
	return h
}

// maxContinuation bounds the output a continuation may carry, so finding
// one costs at most that many checks whatever the prompt.
const maxContinuation = 1 << 14

// continuationOf reads a tokens-in prompt as a model reads its own output
// given back: when the prompt is an earlier prompt followed by the first
// done tokens generated for it (choice 0), as a client continuing an
// aborted request sends, the generation goes on from there. It returns
// that earlier prompt and done (the longest such output), or the prompt
// and 0.
func continuationOf(prompt []uint32) ([]uint32, int) {
	n := len(prompt)
	from := n
	for from > 1 && n-from < maxContinuation && isSentenceToken(prompt[from-1]) {
		from--
	}
	if from == n {
		return prompt, 0
	}
	h := fnvIDs(fnvOffset, prompt[:from])
	for k := from; k < n; k++ {
		if continues(prompt[k:], int(finishHash(h, 0, 0)%uint64(len(sentenceTokens)))) {
			return prompt[:k], n - k
		}
		h = fnvIDs(h, prompt[k:k+1])
	}
	return prompt, 0
}

// continues reports whether ids are the output that starts at start.
func continues(ids []uint32, start int) bool {
	for i, id := range ids {
		if wordAt(start+i).id != id {
			return false
		}
	}
	return true
}

// isSentenceToken reports whether id is one of [Sentence]'s tokens.
func isSentenceToken(id uint32) bool {
	if id == againToken.id {
		return true
	}
	for _, t := range sentenceTokens {
		if t.id == id {
			return true
		}
	}
	return false
}
