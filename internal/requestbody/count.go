package requestbody

import (
	"github.com/coordinator-project/coordinator/internal/wire/imageparts"
	"github.com/coordinator-project/coordinator/internal/wire/legs"
)

// CheckCount checks a body whose prompt tokens are counted
// (/v1/messages/count_tokens, /v1/responses/input_tokens) as Check does
// the inference body of its format, but that a Messages body needs no
// "max_tokens" (Anthropic's count_tokens request has none, and a
// max_tokens sent is not read). Other formats are not counted: an error.
func (d *Document) CheckCount() error {
	var err error
	switch d.format {
	case legs.FormatMessages:
		err = checkMessagesInput(d.root)
	case legs.FormatResponses:
		err = checkResponses(d.root, false) // a count does not read the store: previous_response_id is refused
	default:
		return legs.Invalidf("token counting takes a Messages or Responses body, not %s", d.format)
	}
	if err != nil {
		return err
	}
	if s, ok := shapeOf(d.format); ok {
		if err := imageparts.Check(d.root, s); err != nil {
			return legs.Invalidf("%v", err)
		}
	}
	return nil
}
