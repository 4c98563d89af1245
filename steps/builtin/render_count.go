package builtin

import (
	"context"
	"fmt"

	"github.com/coordinator-project/coordinator/internal/jsonbody"
	"github.com/coordinator-project/coordinator/internal/wire/legs"
	"github.com/coordinator-project/coordinator/internal/wire/tochat"
	"github.com/coordinator-project/coordinator/steps"
)

// CountTokens implements steps.TokenCounter: the number of token IDs the
// render service answers for the chat body vLLM makes of rc's Messages or
// Responses body (internal/wire/tochat), posted to
// <address>/v1/chat/completions/render as a chat render is, with the same
// headers, request id, retries and answer bound. max_total_tokens does not
// apply: the count is what the client asks for, however large.
func (r *Render) CountTokens(ctx context.Context, rc *steps.RequestContext) (int, error) {
	var convert func([]byte) ([]byte, error)
	switch rc.Format {
	case legs.FormatMessages:
		convert = tochat.Messages
	case legs.FormatResponses:
		convert = tochat.Responses
	default:
		return 0, legs.Invalidf("token counting takes a Messages or Responses body, not %s", rc.Format)
	}
	doc, err := rc.Document()
	if err != nil {
		return 0, err
	}
	chat, err := convert(doc.Bytes())
	if err != nil {
		return 0, err
	}
	answer, err := r.post(ctx, rc, legs.PathChat, [][]byte{chat})
	if err != nil {
		return 0, err
	}
	obj, err := jsonbody.ParseIndexed(answer, renderAnswerIndex)
	if err != nil {
		return 0, fmt.Errorf("render: decode answer: %w", err)
	}
	tokens, err := answerTokens(obj)
	if err != nil {
		return 0, err
	}
	return tokens.Len(), nil
}

var _ steps.TokenCounter = (*Render)(nil)
