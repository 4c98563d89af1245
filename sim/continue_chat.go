package sim

import (
	"encoding/json"
	"strings"
)

// A chat whose last message is the assistant's, sent with
// "continue_final_message": true and "add_generation_prompt": false, asks
// the model to go on with that message (vLLM's continuation of a chat, as
// a client continuing an aborted answer sends it). The render service
// leaves that message open (no <|im_end|> after it), and a worker whose
// message is the first k tokens of its chat output ([ChatText]) goes on
// from token k, as a tokens-in request does from the output it is given
// back (continuationOf).

// errBothPrompts is vLLM's refusal of a chat that asks for both.
const errBothPrompts = "Cannot set both `continue_final_message` and `add_generation_prompt` to True."

// ChatText is the text of the first n tokens of a chat answer's choice:
// [Sentence] repeated.
func ChatText(n int) string {
	var b strings.Builder
	for i := range n {
		b.WriteString(wordAt(i).text)
	}
	return b.String()
}

// continueFlags are the members of a chat body that ask to continue its
// final message.
type continueFlags struct {
	ContinueFinalMessage *bool `json:"continue_final_message"`
	AddGenerationPrompt  *bool `json:"add_generation_prompt"`
}

// asked reports whether the body asks to continue its final message;
// asking for a generation prompt too is refused as vLLM does.
func (f continueFlags) asked() (bool, *apiError) {
	if f.ContinueFinalMessage == nil || !*f.ContinueFinalMessage {
		return false, nil
	}
	if f.AddGenerationPrompt != nil && *f.AddGenerationPrompt {
		return false, badRequest(errBothPrompts)
	}
	return true, nil
}

// chatDone is how many tokens of its output a chat request gives back: k
// when it continues a final assistant message whose content is the first
// k tokens of the chat output, else 0.
func (req *workerRequest) chatDone() int {
	if on, _ := req.continueFlags.asked(); !on || req.format != formatChat {
		return 0
	}
	var msgs []chatMessage
	if json.Unmarshal(req.Messages, &msgs) != nil || len(msgs) == 0 || msgs[len(msgs)-1].Role != "assistant" {
		return 0
	}
	var text string
	if json.Unmarshal(msgs[len(msgs)-1].Content, &text) != nil {
		return 0
	}
	return chatPrefix(text)
}

// chatPrefix is k when text is the first k tokens of the chat output, 0
// when it is none (at most maxContinuation tokens are tried).
func chatPrefix(text string) int {
	at := 0
	for k := 0; k < maxContinuation && at < len(text); k++ {
		w := wordAt(k).text
		if !strings.HasPrefix(text[at:], w) {
			return 0
		}
		at += len(w)
		if at == len(text) {
			return k + 1
		}
	}
	return 0
}

// continueChatTemplate renders messages whose final one is continued: as
// applyChatTemplate without a generation prompt, that message left open
// (its <|im_end|> and the newline after it cut).
func (t *tokenizer) continueChatTemplate(msgs []chatMessage) ([]uint32, []renderedImage, *apiError) {
	ids, images, err := t.applyChatTemplate(msgs, false)
	if err != nil {
		return nil, nil, err
	}
	for i := len(ids) - 1; i >= 0; i-- {
		if ids[i] == IMEndTokenID {
			return ids[:i], images, nil
		}
	}
	return ids, images, nil
}

// chatIDs renders the chat's messages: with a generation prompt unless
// add_generation_prompt is false, or continuing the final message.
func (req *renderRequest) chatIDs(tok *tokenizer) ([]uint32, []renderedImage, *apiError) {
	cont, apiErr := continueFlags{ContinueFinalMessage: req.ContinueFinalMessage, AddGenerationPrompt: req.AddGenerationPrompt}.asked()
	if apiErr != nil {
		return nil, nil, apiErr
	}
	if cont {
		return tok.continueChatTemplate(req.Messages)
	}
	return tok.applyChatTemplate(req.Messages, req.AddGenerationPrompt == nil || *req.AddGenerationPrompt)
}
