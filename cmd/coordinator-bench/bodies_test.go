package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"image/png"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/sim"
)

func TestPutDigits(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		width int
		nonce uint64
		want  string
	}{
		{name: "zero", width: 4, nonce: 0, want: "0000"},
		{name: "padded", width: 6, nonce: 42, want: "000042"},
		{name: "full width", width: 3, nonce: 999, want: "999"},
		{name: "wraps above the width", width: 3, nonce: 1234, want: "234"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			span := make([]byte, tt.width)
			putDigits(span, tt.nonce)
			assert.Equal(t, tt.want, string(span))
		})
	}
}

func TestPutNonceIDs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		nonce uint64
		want  string
	}{
		{name: "zero", nonce: 0, want: "10000,10000"},
		{name: "low ID", nonce: 1, want: "10000,10001"},
		{name: "low ID wraps into the high one", nonce: nonceIDs, want: "10001,10000"},
		{name: "largest unique nonce", nonce: maxNonce - 1, want: "99999,99999"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			span := make([]byte, 2*tokenDigits+1)
			putNonceIDs(span, tt.nonce)
			assert.Equal(t, tt.want, string(span))
		})
	}
}

// testNonces are nonces whose bodies must all differ: neighbours, the
// carries of the token-array IDs and of the decimal digits, the largest.
var testNonces = []uint64{0, 1, 2, 9, 10, 999, 1000, nonceIDs - 1, nonceIDs, nonceIDs + 1, 123_456_789, maxNonce - 1}

// cascadeTemplates builds every cascade template once for the tests.
func cascadeTemplates(t *testing.T) map[string]*template {
	t.Helper()
	out := map[string]*template{}
	for _, sc := range scenarios {
		if sc.newTemplate == nil {
			continue
		}
		tpl, err := sc.newTemplate()
		require.NoError(t, err, sc.name)
		out[sc.name] = tpl
	}
	require.NotEmpty(t, out)
	return out
}

func TestTemplatesGiveUniqueValidBodies(t *testing.T) {
	t.Parallel()
	for name, tpl := range cascadeTemplates(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			seen := map[string]uint64{}
			var buf []byte
			for _, n := range testNonces {
				buf = tpl.fill(buf, n)
				require.True(t, json.Valid(buf), "nonce %d: invalid JSON", n)
				assert.Len(t, buf, len(tpl.body), "nonce %d: the length is fixed", n)
				if prev, dup := seen[string(buf)]; dup {
					t.Errorf("nonces %d and %d give the same body", prev, n)
				}
				seen[string(buf)] = n
			}
			again := tpl.fill(nil, testNonces[3])
			assert.Equal(t, tpl.fill(nil, testNonces[3]), again, "fill is deterministic")
		})
	}
}

func TestImageChatTemplate(t *testing.T) {
	t.Parallel()
	tpl, err := imageChatTemplate(imageBodyBytes)
	require.NoError(t, err)
	assert.InDelta(t, imageBodyBytes, len(tpl.body), imageBodyBytes/100, "about 1 MiB")

	parse := func(nonce uint64) (text, url string) {
		var body struct {
			Messages []struct {
				Content []struct {
					Type     string `json:"type"`
					Text     string `json:"text"`
					ImageURL struct {
						URL string `json:"url"`
					} `json:"image_url"`
				} `json:"content"`
			} `json:"messages"`
		}
		require.NoError(t, json.Unmarshal(tpl.fill(nil, nonce), &body))
		require.Len(t, body.Messages, 1)
		parts := body.Messages[0].Content
		require.Len(t, parts, 2)
		require.Equal(t, "text", parts[0].Type)
		require.Equal(t, "image_url", parts[1].Type)
		return parts[0].Text, parts[1].ImageURL.URL
	}
	for _, n := range []uint64{0, 7, 123_456_789_012} {
		text, url := parse(n)
		assert.Contains(t, text, "Request ")
		raw, ok := strings.CutPrefix(url, dataURIPrefix)
		require.True(t, ok, "a data: URI")
		pic, err := base64.StdEncoding.DecodeString(raw)
		require.NoError(t, err)
		// png.Decode checks every chunk's CRC, the patched nonce chunk included.
		cfg, err := png.Decode(bytes.NewReader(pic))
		require.NoError(t, err, "nonce %d: a valid PNG", n)
		assert.Equal(t, 512, cfg.Bounds().Dx())
		digits := make([]byte, nonceDigits)
		putDigits(digits, n)
		assert.Contains(t, string(pic), pngNonceKey+string(digits), "the PNG carries the nonce")
		assert.Contains(t, text, string(digits), "the text carries the nonce")
	}
	text1, url1 := parse(1)
	text2, url2 := parse(2)
	assert.NotEqual(t, text1, text2, "each request its own text")
	assert.NotEqual(t, sim.ImageHash(url1), sim.ImageHash(url2), "each request its own image")
}

func TestTokenPromptTemplate(t *testing.T) {
	t.Parallel()
	tpl, err := tokenPromptTemplate(promptTokens)
	require.NoError(t, err)
	var first []uint32
	for _, n := range []uint64{0, 1, nonceIDs} {
		var body struct {
			Prompt []uint32 `json:"prompt"`
		}
		require.NoError(t, json.Unmarshal(tpl.fill(nil, n), &body))
		require.Len(t, body.Prompt, promptTokens)
		for i, id := range body.Prompt {
			require.Less(t, id, uint32(100000), "ID %d", i)
		}
		if first == nil {
			first = body.Prompt
			continue
		}
		assert.NotEqual(t, first[:2], body.Prompt[:2], "the nonce IDs differ")
		assert.Equal(t, first[2:], body.Prompt[2:], "the rest is shared")
	}
	_, err = tokenPromptTemplate(1)
	assert.Error(t, err)
}

func TestLongTextTokens(t *testing.T) {
	t.Parallel()
	for _, n := range []int{1, 2, 12, 13, 14, 100} {
		text := string(longText(n))
		pieces := strings.Count(text, " ") + strings.Count(text, ".")
		assert.Equal(t, n, pieces, "%d tokens: one per word and period", n)
	}
}

// TestLongChatRendersToPromptTokens renders the long chat with the
// simulator's render service (cl100k_base): promptTokens tokens, whatever
// the nonce.
func TestLongChatRendersToPromptTokens(t *testing.T) {
	t.Parallel()
	tpl, err := longChatTemplate()
	require.NoError(t, err)
	srv := httptest.NewServer(sim.New(sim.Options{}).Render())
	defer srv.Close()
	var prev []uint32
	for _, n := range []uint64{1, 2, 987_654_321_098} {
		resp, err := http.Post(srv.URL+"/v1/chat/completions/render", "application/json", bytes.NewReader(tpl.fill(nil, n)))
		require.NoError(t, err)
		var out struct {
			TokenIDs []uint32 `json:"token_ids"`
		}
		err = json.NewDecoder(resp.Body).Decode(&out)
		resp.Body.Close()
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		assert.Len(t, out.TokenIDs, promptTokens, "nonce %d", n)
		assert.NotEqual(t, prev, out.TokenIDs, "nonce %d: its own token IDs", n)
		prev = out.TokenIDs
	}
}
