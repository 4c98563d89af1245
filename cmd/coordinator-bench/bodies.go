package main

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"image"
	"image/png"
	"math/rand/v2"
	"strconv"
)

// template is a request body made unique per request: a fixed body in
// which patches rewrite fixed-length spans from the request's nonce, so a
// body costs the bench one copy and a few bytes of formatting. Distinct
// nonces below maxNonce give distinct bodies (and distinct prompts). A
// template is immutable and safe for concurrent use.
type template struct {
	body    []byte
	patches []patch
}

// patch rewrites body[at:at+n] from a nonce; write must fill the whole span.
type patch struct {
	at, n int
	write func(span []byte, nonce uint64)
}

// nonceDigits is the width of the decimal nonce in prompt texts and in the
// PNG's nonce chunk (10^12 nonces).
const nonceDigits = 12

// fill writes the body of the request with nonce into dst (reusing its
// storage) and returns it.
func (t *template) fill(dst []byte, nonce uint64) []byte {
	dst = append(dst[:0], t.body...)
	for _, p := range t.patches {
		p.write(dst[p.at:p.at+p.n], nonce)
	}
	return dst
}

// putDigits writes nonce mod 10^len(span) into span as zero-padded decimal.
func putDigits(span []byte, nonce uint64) {
	for i := len(span) - 1; i >= 0; i-- {
		span[i] = byte('0' + nonce%10)
		nonce /= 10
	}
}

// digitsPatch is a patch of nonceDigits decimal digits at the first
// occurrence of marker (nonceDigits characters) in body.
func digitsPatch(body []byte, marker string) (patch, error) {
	at := bytes.Index(body, []byte(marker))
	if at < 0 || len(marker) != nonceDigits {
		return patch{}, fmt.Errorf("template: no %d-character marker %q", nonceDigits, marker)
	}
	return patch{at: at, n: nonceDigits, write: putDigits}, nil
}

// nonceMarker stands for the nonce digits in a template until patched.
const nonceMarker = "000000000000"

// Token-ID prompts put the nonce in their first two IDs, each of
// tokenDigits digits (so the JSON keeps its length): 90000² nonces.
const (
	tokenDigits = 5
	minNonceID  = 10000 // the smallest 5-digit ID
	nonceIDs    = 90000 // 5-digit IDs
	// maxNonce bounds the nonces every template keeps unique: the
	// token-array prompt's 90000² (the digit nonces go to 10^12).
	maxNonce = nonceIDs * nonceIDs
)

// putNonceIDs writes "<a>,<b>", the two 5-digit IDs of nonce.
func putNonceIDs(span []byte, nonce uint64) {
	putDigits(span[:tokenDigits], minNonceID+nonce/nonceIDs%nonceIDs)
	span[tokenDigits] = ','
	putDigits(span[tokenDigits+1:], minNonceID+nonce%nonceIDs)
}

// promptTokens is the length of the token-array and long-text prompts.
const promptTokens = 32768

// tokenPromptTemplate is a non-streaming completions request whose prompt
// is an array of ids token IDs below 100000: the first two carry the nonce,
// the rest are pseudo-random and the same for every request.
func tokenPromptTemplate(ids int) (*template, error) {
	if ids < 2 {
		return nil, errors.New("template: a token prompt needs at least 2 IDs")
	}
	b := []byte(`{"model":"sim-model","prompt":[`)
	at := len(b)
	b = fmt.Appendf(b, "%d,%d", minNonceID, minNonceID)
	r := rand.New(rand.NewPCG(1, 2))
	for range ids - 2 {
		b = append(b, ',')
		b = strconv.AppendUint(b, r.Uint64N(100000), 10)
	}
	b = fmt.Appendf(b, `],"max_tokens":%d,"stream":false}`, chatTokens)
	return &template{body: b, patches: []patch{{at: at, n: 2*tokenDigits + 1, write: putNonceIDs}}}, nil
}

// The long text of the chat prompt: sentences of words that are one
// cl100k_base token each (with their leading space), ended by a period
// (one more token). sentenceWords words make a sentence.
var (
	sentenceStarts = []string{"The", "This", "Every", "Each", "Our", "In", "It", "A"}
	words          = []string{
		"the", "of", "and", "to", "in", "for", "with", "on", "at", "by", "from", "as",
		"is", "was", "will", "can", "should", "would", "has", "had", "not", "but",
		"system", "request", "model", "data", "time", "first", "server", "process",
		"value", "result", "simple", "large", "small", "fast", "slow", "new", "old",
		"good", "high", "low", "long", "short", "way", "part", "place", "case", "point",
		"group", "number", "world", "work", "life", "day", "year", "people", "water",
		"city", "state", "house", "road", "light", "night", "morning", "window", "table",
		"paper", "letter", "story", "river", "tree", "garden", "music", "voice",
		"question", "answer", "reason", "line", "page", "book", "word", "name", "file",
		"test", "image", "network", "memory", "power", "field", "team", "market",
	}
)

const sentenceWords = 12

// longTextPrefix opens the long text with the nonce: "Request " is 2
// tokens, the 12 digits 4 (cl100k_base splits digits in threes) and the
// period 1.
const (
	longTextPrefix       = "Request " + nonceMarker + "."
	longTextPrefixTokens = 7
	// chatTemplateTokens is what the simulator's ChatML template adds around
	// one user message: <|im_start|>user\n ... <|im_end|>\n<|im_start|>assistant\n.
	chatTemplateTokens = 8
)

// longText is English-like text of exactly tokens cl100k_base tokens after
// the nonce prefix, pseudo-random but the same on every call.
func longText(tokens int) []byte {
	r := rand.New(rand.NewPCG(3, 4))
	b := make([]byte, 0, tokens*6)
	for tokens > 0 {
		n := min(sentenceWords, tokens-1) // words in this sentence, the period being the last token
		if n < 1 {
			break // a lone period: no sentence fits; pad below
		}
		b = append(b, ' ')
		b = append(b, sentenceStarts[r.IntN(len(sentenceStarts))]...)
		for range n - 1 {
			b = append(b, ' ')
			b = append(b, words[r.IntN(len(words))]...)
		}
		b = append(b, '.')
		tokens -= n + 1
	}
	if tokens == 1 {
		b = append(b, " the"...)
	}
	return b
}

// longChatTemplate is a non-streaming chat whose single user message
// renders to promptTokens tokens: the nonce prefix, then long text.
func longChatTemplate() (*template, error) {
	text := append([]byte(longTextPrefix), longText(promptTokens-chatTemplateTokens-longTextPrefixTokens)...)
	b := []byte(`{"model":"sim-model","messages":[{"role":"user","content":"`)
	b = append(b, text...) // plain ASCII words: no JSON escaping needed
	b = fmt.Appendf(b, `"}],"max_tokens":%d,"stream":false}`, chatTokens)
	p, err := digitsPatch(b, nonceMarker)
	if err != nil {
		return nil, err
	}
	return &template{body: b, patches: []patch{p}}, nil
}

// imageBodyBytes is the size the image chat aims at: 1 MiB of JSON, almost
// all of it the base64 of the PNG.
const imageBodyBytes = 1 << 20

// dataURIPrefix starts an inline PNG image URL.
const dataURIPrefix = "data:image/png;base64,"

// imageChatTemplate is a non-streaming chat with a short text part and one
// inline PNG of noise pixels, the body about size bytes (see imageChat).
func imageChatTemplate(size int) (*template, error) { return imageChat(size, nil) }

// imageChat is a non-streaming chat with a text part and one inline PNG of
// noise pixels. The text is a short request carrying the nonce, then text;
// the body is about size bytes plus len(text). Both the text and the PNG
// (a tEXt chunk) carry the nonce, so every request has its own prompt text
// and its own image (another mm_hash).
func imageChat(size int, text []byte) (*template, error) {
	head := []byte(`{"model":"sim-model","messages":[{"role":"user","content":[` +
		`{"type":"text","text":"Request ` + nonceMarker + `. Describe this image in one sentence.`)
	head = append(head, text...) // plain ASCII words: no JSON escaping needed
	head = append(head, `"},{"type":"image_url","image_url":{"url":"`+dataURIPrefix...)
	base := len(head) - len(text) // what size counts of the head
	tail := fmt.Appendf(nil, `"}}]}],"max_tokens":%d,"stream":false}`, chatTokens)
	// base64 makes 4 characters of 3 bytes; the PNG adds its chunks to the
	// pixel rows (one filter byte and 3 bytes per pixel each).
	const width = 512
	pngBytes := (size - base - len(tail)) / 4 * 3
	height := max(1, (pngBytes-pngOverhead(pngBytes))/(1+3*width))
	img, chunkAt, err := noisePNG(width, height)
	if err != nil {
		return nil, err
	}
	b := append(head, base64.StdEncoding.EncodeToString(img)...)
	b = append(b, tail...)
	nonce, err := digitsPatch(b, nonceMarker)
	if err != nil {
		return nil, err
	}
	pic, err := pngNoncePatch(img, chunkAt, len(head))
	if err != nil {
		return nil, err
	}
	return &template{body: b, patches: []patch{nonce, pic}}, nil
}

// longTextBytes is about n bytes (at least n, at most a sentence more) of
// the long text, the same on every call.
func longTextBytes(n int) []byte {
	text := longText(n/4 + 16)
	for len(text) < n {
		text = longText(2 * len(text))
	}
	if i := bytes.IndexByte(text[n:], '.'); i >= 0 {
		return text[:n+i+1]
	}
	return text
}

// tokenPromptOfSize is tokenPromptTemplate with as many IDs as make a body
// of about size bytes (6 bytes an ID, on average).
func tokenPromptOfSize(size int) (*template, error) {
	return tokenPromptTemplate(size / 6)
}

// PNG layout constants: the signature and IHDR chunk come first; the nonce
// chunk, a tEXt chunk with keyword "nonce", follows IHDR.
const (
	pngIHDREnd    = 8 + 12 + 13 // signature, then IHDR: length, type, 13 data bytes, CRC
	pngNonceKey   = "nonce\x00"
	pngNonceChunk = 12 + len(pngNonceKey) + nonceDigits // length, type, data, CRC
)

// pngOverhead estimates the bytes a stored (uncompressed) PNG of about
// size bytes adds to its pixel rows: signature, IHDR, nonce chunk, IEND,
// the zlib header and checksum, a 5-byte header per 64 KiB stored deflate
// block and 12 bytes per 32 KiB IDAT chunk.
func pngOverhead(size int) int {
	return pngIHDREnd + pngNonceChunk + 12 + 6 + 5*(size/65535+1) + 12*(size/32768+1)
}

// noisePNG encodes a width×height PNG of opaque pseudo-random pixels (8-bit
// RGB), uncompressed: noise would not compress anyway, and this way its size
// is known. A tEXt chunk holding nonceMarker follows IHDR, at chunkAt.
func noisePNG(width, height int) (img []byte, chunkAt int, err error) {
	m := image.NewNRGBA(image.Rect(0, 0, width, height))
	r := rand.New(rand.NewPCG(5, 6))
	for i := 0; i < len(m.Pix); i += 4 {
		v := r.Uint32()
		m.Pix[i], m.Pix[i+1], m.Pix[i+2], m.Pix[i+3] = byte(v), byte(v>>8), byte(v>>16), 0xff
	}
	var buf bytes.Buffer
	enc := png.Encoder{CompressionLevel: png.NoCompression}
	if err := enc.Encode(&buf, m); err != nil {
		return nil, 0, fmt.Errorf("png: %w", err)
	}
	raw := buf.Bytes()
	if len(raw) < pngIHDREnd || string(raw[12:16]) != "IHDR" {
		return nil, 0, errors.New("png: no IHDR first")
	}
	out := make([]byte, 0, len(raw)+pngNonceChunk)
	out = append(out, raw[:pngIHDREnd]...)
	out = appendPNGChunk(out, "tEXt", []byte(pngNonceKey+nonceMarker))
	out = append(out, raw[pngIHDREnd:]...)
	return out, pngIHDREnd, nil
}

// appendPNGChunk appends a chunk: length, type, data, CRC of type and data.
func appendPNGChunk(b []byte, typ string, data []byte) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(data)))
	start := len(b)
	b = append(b, typ...)
	b = append(b, data...)
	return binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(b[start:]))
}

// pngNoncePatch rewrites the nonce chunk of img, base64-encoded at offset
// base64At of the body: the digits, the chunk's CRC, and the base64
// characters of the 3-byte groups they fall in.
func pngNoncePatch(img []byte, chunkAt, base64At int) (patch, error) {
	from := chunkAt / 3 * 3
	to := (chunkAt + pngNonceChunk + 2) / 3 * 3
	if to > len(img) {
		return patch{}, errors.New("png: nonce chunk at the very end")
	}
	window := bytes.Clone(img[from:to])
	digitsAt := chunkAt - from + 8 + len(pngNonceKey) // after length, type and keyword
	crcAt := digitsAt + nonceDigits
	return patch{
		at: base64At + from/3*4,
		n:  (to - from) / 3 * 4,
		write: func(span []byte, nonce uint64) {
			var scratch [pngNonceChunk + 4]byte // the window is at most the chunk plus 4 bytes
			w := append(scratch[:0], window...)
			putDigits(w[digitsAt:crcAt], nonce)
			crc := crc32.ChecksumIEEE(w[chunkAt-from+4 : crcAt]) // type and data
			binary.BigEndian.PutUint32(w[crcAt:], crc)
			base64.StdEncoding.Encode(span, w)
		},
	}, nil
}

// structuredChatTemplate is a non-streaming chat of messages user
// messages, each of blocks text blocks of text bytes (plain ASCII): the
// body shapes of issue 34 whose parse once cost 15–19× the body. The
// first block carries the nonce.
func structuredChatTemplate(messages, blocks, text int) (*template, error) {
	b := []byte(`{"model":"sim-model","messages":[`)
	word := bytes.Repeat([]byte("a"), text)
	for m := range messages {
		if m > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"role":"user","content":[`...)
		for k := range blocks {
			if k > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"type":"text","text":"`...)
			if m == 0 && k == 0 {
				b = append(b, longTextPrefix...)
			}
			b = append(b, word...)
			b = append(b, `"}`...)
		}
		b = append(b, "]}"...)
	}
	b = fmt.Appendf(b, `],"max_tokens":%d,"stream":false}`, chatTokens)
	p, err := digitsPatch(b, nonceMarker)
	if err != nil {
		return nil, err
	}
	return &template{body: b, patches: []patch{p}}, nil
}
