package sim

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	tiktoken "github.com/pkoukk/tiktoken-go"
	tiktokenloader "github.com/pkoukk/tiktoken-go-loader"
)

// Special tokens of the render service's ChatML template (cl100k_base IDs;
// <|im_start|> and <|im_end|> are those of OpenAI's cl100k_im) and its image
// placeholder.
const (
	IMStartTokenID uint32 = 100264
	IMEndTokenID   uint32 = 100265
	// ImageTokenID fills the placeholder run of every image.
	ImageTokenID uint32 = 100300
	// ImagePlaceholderLength is the number of tokens of every image.
	ImagePlaceholderLength = 4
)

// cl100kPattern is cl100k_base's pre-tokenization regular expression.
const cl100kPattern = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`

// sharedTokenizer loads cl100k_base once per process, on first use, from
// the ranks embedded in tiktoken-go-loader (no network). The tokenizer is
// immutable and safe for concurrent use, so every Sim shares it.
var sharedTokenizer = sync.OnceValues(loadTokenizer)

// tokenizer encodes text with cl100k_base; special tokens in the text are
// encoded as ordinary text, the template inserts the real ones.
type tokenizer struct {
	tk *tiktoken.Tiktoken
}

func loadTokenizer() (*tokenizer, error) {
	ranks, err := tiktokenloader.NewOfflineLoader().LoadTiktokenBpe("cl100k_base.tiktoken")
	if err != nil {
		return nil, fmt.Errorf("tokenizer: load cl100k_base: %w", err)
	}
	bpe, err := tiktoken.NewCoreBPE(ranks, map[string]int{"<|endoftext|>": 100257}, cl100kPattern)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: build cl100k_base: %w", err)
	}
	return &tokenizer{tk: tiktoken.NewTiktoken(bpe, &tiktoken.Encoding{Name: "cl100k_base"}, nil)}, nil
}

// encode returns the cl100k_base token IDs of text.
func (t *tokenizer) encode(text string) []uint32 {
	if text == "" {
		return nil
	}
	ids := t.tk.EncodeOrdinary(text)
	out := make([]uint32, len(ids))
	for i, id := range ids {
		out[i] = uint32(id)
	}
	return out
}

// chatMessage is one message of a chat request, as render reads it.
type chatMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

type contentPart struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	ImageURL *struct {
		URL string `json:"url"`
	} `json:"image_url"`
}

// renderedImage is one image of a rendered chat prompt.
type renderedImage struct {
	hash        string
	kwargs      string
	placeholder placeholder
}

// chatPrompt accumulates the token IDs of a templated chat.
type chatPrompt struct {
	tok     *tokenizer
	ids     []uint32
	pending strings.Builder
	images  []renderedImage
}

func (p *chatPrompt) flush() {
	if p.pending.Len() > 0 {
		p.ids = append(p.ids, p.tok.encode(p.pending.String())...)
		p.pending.Reset()
	}
}

func (p *chatPrompt) special(id uint32) {
	p.flush()
	p.ids = append(p.ids, id)
}

func (p *chatPrompt) image(url string) {
	p.flush()
	hash := ImageHash(url)
	p.images = append(p.images, renderedImage{
		hash:        hash,
		kwargs:      ImageKwargs(hash),
		placeholder: placeholder{Offset: len(p.ids), Length: ImagePlaceholderLength},
	})
	for range ImagePlaceholderLength {
		p.ids = append(p.ids, ImageTokenID)
	}
}

// applyChatTemplate renders messages with ChatML:
//
//	<|im_start|>{role}\n{content}<|im_end|>\n ... [<|im_start|>assistant\n]
//
// Text parts of a message are concatenated; each image_url part becomes
// [ImagePlaceholderLength] × [ImageTokenID]. Text between special tokens and
// images is encoded with cl100k_base.
func (t *tokenizer) applyChatTemplate(msgs []chatMessage, addGenerationPrompt bool) ([]uint32, []renderedImage, *apiError) {
	p := &chatPrompt{tok: t}
	for i, m := range msgs {
		p.special(IMStartTokenID)
		p.pending.WriteString(m.Role)
		p.pending.WriteByte('\n')
		if err := p.content(m.Content); err != nil {
			return nil, nil, badRequest("messages[%d].content: %s", i, err.message)
		}
		p.special(IMEndTokenID)
		p.pending.WriteByte('\n')
	}
	if addGenerationPrompt {
		p.special(IMStartTokenID)
		p.pending.WriteString("assistant\n")
	}
	p.flush()
	return p.ids, p.images, nil
}

// content adds a message's content: null, a string or a list of parts.
func (p *chatPrompt) content(raw json.RawMessage) *apiError {
	if isNull(raw) {
		return nil
	}
	var text string
	if err := json.Unmarshal(raw, &text); err == nil {
		p.pending.WriteString(text)
		return nil
	}
	var parts []contentPart
	if err := json.Unmarshal(raw, &parts); err != nil {
		return badRequest("must be a string or a list of content parts")
	}
	for _, part := range parts {
		switch part.Type {
		case "text":
			p.pending.WriteString(part.Text)
		case "image_url":
			if part.ImageURL == nil || part.ImageURL.URL == "" {
				return badRequest("image_url part without url")
			}
			p.image(part.ImageURL.URL)
		default:
			return badRequest("content part type %q is not supported by the simulator", part.Type)
		}
	}
	return nil
}

// ImageHash is the mm_hash render reports for an image: the hex SHA-256 of
// its URL string (data: URIs included), cut to 32 characters.
func ImageHash(url string) string {
	sum := sha256.Sum256([]byte(url))
	return hex.EncodeToString(sum[:16])
}

// ImageKwargs is the kwargs_data render reports for an image with this
// mm_hash: base64 of 12 bytes derived from the hash (a stand-in for vLLM's
// pixel tensors).
func ImageKwargs(hash string) string {
	sum := sha256.Sum256([]byte("sim-kwargs/" + hash))
	return base64.StdEncoding.EncodeToString(sum[:12])
}
