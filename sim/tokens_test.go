package sim

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSentenceTokensMatchCL100K(t *testing.T) {
	t.Parallel()
	var ids []uint32
	var text strings.Builder
	for _, tok := range sentenceTokens {
		ids = append(ids, tok.id)
		text.WriteString(tok.text)
		assert.Equal(t, mustJSON(t, tok.text), tok.json)
	}
	assert.Equal(t, Sentence, text.String())
	assert.Equal(t, refEncode(t, Sentence), ids, "each table entry is one cl100k_base token")
	assert.Equal(t, refEncode(t, againToken.text), []uint32{againToken.id})
	assert.Equal(t, mustJSON(t, againToken.text), againToken.json)
}

func TestCompletionTokensDecodeToTheSentence(t *testing.T) {
	t.Parallel()
	enc, err := referenceEncoding()
	require.NoError(t, err)
	prompt := []uint32{42}
	ids := CompletionTokens(prompt, 40, 0)
	ints := make([]int, len(ids))
	for i, id := range ids {
		ints[i] = int(id)
	}
	text := enc.Decode(ints)
	assert.Contains(t, Sentence+" "+Sentence+" "+Sentence+" "+Sentence, strings.TrimSpace(text))
}

func TestCompletionTokensDeterministic(t *testing.T) {
	t.Parallel()
	prompts := [][]uint32{nil, {1}, {1, 2, 3}, {3, 2, 1}, {100300, 100300, 5}}
	for _, p := range prompts {
		for c := range 3 {
			a := CompletionTokens(p, 20, c)
			assert.Equal(t, a, CompletionTokens(p, 20, c), "same inputs, same tokens")
			assert.Len(t, a, 20)
			assert.Equal(t, a[:7], CompletionTokens(p, 7, c), "a shorter answer is a prefix")
			for i := range 20 {
				lp := TokenLogprob(p, c, i)
				assert.Less(t, lp, float32(0))
				assert.Greater(t, lp, float32(-2.01))
				assert.Equal(t, lp, TokenLogprob(p, c, i))
			}
		}
	}
	assert.Empty(t, CompletionTokens([]uint32{1}, 0, 0))
}

func TestCompletionTokensDependOnPrompt(t *testing.T) {
	t.Parallel()
	starts := map[int]bool{}
	for i := range uint32(50) {
		starts[completionStart([]uint32{i, i + 1}, 0)] = true
	}
	assert.Greater(t, len(starts), len(sentenceTokens)/2, "different prompts start at different words")
	assert.NotEqual(t,
		[]float32{TokenLogprob([]uint32{1}, 0, 0), TokenLogprob([]uint32{1}, 0, 1)},
		[]float32{TokenLogprob([]uint32{2}, 0, 0), TokenLogprob([]uint32{2}, 0, 1)})
}

func TestTopLogprobs(t *testing.T) {
	t.Parallel()
	prompt := []uint32{9, 8, 7}
	for c := range 2 {
		for pos := range 10 {
			top := TopLogprobs(prompt, c, pos, 5)
			require.Len(t, top, 5)
			assert.Equal(t, top, TopLogprobs(prompt, c, pos, 5), "deterministic")
			assert.Equal(t, top[:2], TopLogprobs(prompt, c, pos, 2), "a smaller k is a prefix")
			assert.Equal(t, CompletionTokens(prompt, pos+1, c)[pos], top[0].TokenID, "the generated token is the most likely")
			assert.Equal(t, TokenLogprob(prompt, c, pos), top[0].Logprob)
			seen := map[uint32]bool{}
			for k, alt := range top {
				assert.False(t, seen[alt.TokenID], "distinct tokens")
				seen[alt.TokenID] = true
				if k > 0 {
					assert.Less(t, alt.Logprob, top[k-1].Logprob, "strictly decreasing")
				}
			}
		}
	}
	assert.Empty(t, TopLogprobs(prompt, 0, 0, 0))
}

// TestContinuationOf: a prompt followed by some of its own output is read
// as that prompt continued, so a continued generation goes on with the
// same tokens; a prompt without its output is not.
func TestContinuationOf(t *testing.T) {
	t.Parallel()
	prompt := []uint32{101, 7, 8, 9}
	full := CompletionTokens(prompt, 40, 0)
	for _, done := range []int{1, 13, 39} {
		earlier, got := continuationOf(append(append([]uint32{}, prompt...), full[:done]...))
		assert.Equal(t, prompt, earlier, "done %d", done)
		assert.Equal(t, done, got)
	}
	earlier, done := continuationOf(prompt)
	assert.Equal(t, prompt, earlier)
	assert.Zero(t, done)
	other := append(append([]uint32{}, prompt...), full[1:5]...) // not its first tokens
	_, done = continuationOf(other)
	assert.Zero(t, done)
}
