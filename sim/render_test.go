package sim

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	tiktoken "github.com/pkoukk/tiktoken-go"
	tiktokenloader "github.com/pkoukk/tiktoken-go-loader"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// referenceEncoding is tiktoken-go's own cl100k_base (its pattern and special
// tokens), independent of the simulator's tokenizer construction.
var referenceEncoding = sync.OnceValues(func() (*tiktoken.Tiktoken, error) {
	tiktoken.SetBpeLoader(tiktokenloader.NewOfflineLoader())
	return tiktoken.GetEncoding("cl100k_base")
})

func refEncode(t *testing.T, text string) []uint32 {
	t.Helper()
	enc, err := referenceEncoding()
	require.NoError(t, err)
	var out []uint32
	for _, id := range enc.EncodeOrdinary(text) {
		out = append(out, uint32(id))
	}
	return out
}

type renderResp struct {
	RequestID      string          `json:"request_id"`
	TokenIDs       []uint32        `json:"token_ids"`
	Features       *renderFeatures `json:"features"`
	SamplingParams map[string]any  `json:"sampling_params"`
	Model          string          `json:"model"`
	Stream         *bool           `json:"stream"`
}

func TestRenderChatText(t *testing.T) {
	t.Parallel()
	e := strictEnv(t)
	tests := []struct {
		name, body string
		want       func(t *testing.T) []uint32
		wantMax    float64
	}{
		{
			name: "hello world",
			body: `{"model":"sim-model","messages":[{"role":"user","content":"hello world"}],"stream":true}`,
			want: func(t *testing.T) []uint32 {
				assert.Equal(t, []uint32{15339, 1917}, refEncode(t, "hello world"), "cl100k_base spelling of hello world")
				return slices.Concat([]uint32{IMStartTokenID}, refEncode(t, "user\nhello world"), []uint32{IMEndTokenID},
					refEncode(t, "\n"), []uint32{IMStartTokenID}, refEncode(t, "assistant\n"))
			},
			wantMax: float64(MaxModelLen - 10),
		},
		{
			name: "system and parts, no generation prompt",
			body: `{"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":[{"type":"text","text":"Hi "},{"type":"text","text":"there"}]}],` +
				`"add_generation_prompt":false,"max_tokens":7}`,
			want: func(t *testing.T) []uint32 {
				return slices.Concat([]uint32{IMStartTokenID}, refEncode(t, "system\nBe brief."), []uint32{IMEndTokenID},
					refEncode(t, "\n"), []uint32{IMStartTokenID}, refEncode(t, "user\nHi there"), []uint32{IMEndTokenID}, refEncode(t, "\n"))
			},
			wantMax: 7,
		},
		{
			name: "special tokens in text stay text",
			body: `{"messages":[{"role":"user","content":"<|im_end|>"}],"max_completion_tokens":3,"max_tokens":9}`,
			want: func(t *testing.T) []uint32 {
				return slices.Concat([]uint32{IMStartTokenID}, refEncode(t, "user\n<|im_end|>"), []uint32{IMEndTokenID},
					refEncode(t, "\n"), []uint32{IMStartTokenID}, refEncode(t, "assistant\n"))
			},
			wantMax: 3,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			resp := post(t, e.render.URL+pathChatRender, legHeader("", "rc-1"), tc.body)
			require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
			got := jsonOf[renderResp](t, resp.body)
			assert.Equal(t, "chatcmpl-rc-1", got.RequestID)
			assert.Equal(t, tc.want(t), got.TokenIDs)
			assert.Nil(t, got.Features, "text-only chats have no features")
			assert.Equal(t, tc.wantMax, got.SamplingParams["max_tokens"])
			assert.Equal(t, "sim-model", got.Model)
			require.NotNil(t, got.Stream)
			assert.False(t, *got.Stream)
		})
	}
}

func TestRenderChatImages(t *testing.T) {
	t.Parallel()
	e := strictEnv(t)
	const url1 = "data:image/png;base64,iVBORw0KGgo="
	const url2 = "https://example.com/cat.jpg"
	body := `{"model":"sim-model","messages":[{"role":"user","content":[` +
		`{"type":"text","text":"Compare"},{"type":"image_url","image_url":{"url":"` + url1 + `"}},` +
		`{"type":"text","text":" and"},{"type":"image_url","image_url":{"url":"` + url2 + `","detail":"low"}}]}]}`
	resp := post(t, e.render.URL+pathChatRender, legHeader("", "img-1"), body)
	require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
	got := jsonOf[renderResp](t, resp.body)

	image := []uint32{ImageTokenID, ImageTokenID, ImageTokenID, ImageTokenID}
	head := slices.Concat([]uint32{IMStartTokenID}, refEncode(t, "user\nCompare"))
	mid := refEncode(t, " and")
	want := slices.Concat(head, image, mid, image, []uint32{IMEndTokenID}, refEncode(t, "\n"),
		[]uint32{IMStartTokenID}, refEncode(t, "assistant\n"))
	assert.Equal(t, want, got.TokenIDs)

	require.NotNil(t, got.Features)
	sum1, sum2 := sha256.Sum256([]byte(url1)), sha256.Sum256([]byte(url2))
	hash1, hash2 := hex.EncodeToString(sum1[:])[:32], hex.EncodeToString(sum2[:])[:32]
	assert.Equal(t, []string{hash1, hash2}, got.Features.MMHashes.Image)
	assert.Equal(t, []placeholder{
		{Offset: len(head), Length: 4},
		{Offset: len(head) + 4 + len(mid), Length: 4},
	}, got.Features.MMPlaceholders.Image)
	assert.Equal(t, []string{ImageKwargs(hash1), ImageKwargs(hash2)}, got.Features.KwargsData.Image)
	assert.NotEmpty(t, got.Features.KwargsData.Image[0])
}

func TestRenderCompletions(t *testing.T) {
	t.Parallel()
	e := strictEnv(t)
	tests := []struct {
		name, body string
		want       func(t *testing.T) [][]uint32
	}{
		{name: "string", body: `{"model":"sim-model","prompt":"hello world"}`,
			want: func(t *testing.T) [][]uint32 { return [][]uint32{{15339, 1917}} }},
		{name: "token ids", body: `{"prompt":[5,6,7]}`,
			want: func(t *testing.T) [][]uint32 { return [][]uint32{{5, 6, 7}} }},
		{name: "batch", body: `{"prompt":["The quick brown fox",[1,2]]}`,
			want: func(t *testing.T) [][]uint32 { return [][]uint32{refEncode(t, "The quick brown fox"), {1, 2}} }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			resp := post(t, e.render.URL+pathCompletionsRender, legHeader("", "rp-1"), tc.body)
			require.Equal(t, http.StatusOK, resp.status, "body: %s", resp.body)
			got := jsonOf[[]map[string]any](t, resp.body)
			want := tc.want(t)
			require.Len(t, got, len(want))
			for i, w := range want {
				assert.Contains(t, got[i], "features")
				assert.Nil(t, got[i]["features"], "completions render has features null")
				ids := jsonOf[renderResp](t, []byte(mustJSON(t, got[i]))).TokenIDs
				assert.Equal(t, w, ids)
				assert.Equal(t, "cmpl-rp-1-"+string(rune('0'+i)), got[i]["request_id"])
				assert.Equal(t, false, got[i]["stream"])
			}
		})
	}
}

func TestRenderErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, path, body string
		header           http.Header
		wantStatus       int
		wantMessage      string
	}{
		{name: "unknown model chat", path: pathChatRender, body: `{"model":"nope","messages":[]}`, wantStatus: 404,
			wantMessage: "The model `nope` does not exist."},
		{name: "unknown model completions", path: pathCompletionsRender, body: `{"model":"nope","prompt":"x"}`, wantStatus: 404,
			wantMessage: "The model `nope` does not exist."},
		{name: "malformed JSON", path: pathChatRender, body: `{"messages":`, wantStatus: 400, wantMessage: "invalid JSON body"},
		{name: "messages not a list", path: pathChatRender, body: `{"messages":{}}`, wantStatus: 400, wantMessage: "invalid JSON body"},
		{name: "missing messages", path: pathChatRender, body: `{}`, wantStatus: 400, wantMessage: "messages: field required"},
		{name: "bad content", path: pathChatRender, body: `{"messages":[{"role":"user","content":3}]}`, wantStatus: 400,
			wantMessage: "messages[0].content: must be a string or a list of content parts"},
		{name: "audio part", path: pathChatRender, body: `{"messages":[{"role":"user","content":[{"type":"input_audio"}]}]}`, wantStatus: 400,
			wantMessage: `messages[0].content: content part type "input_audio" is not supported by the simulator`},
		{name: "image without url", path: pathChatRender, body: `{"messages":[{"role":"user","content":[{"type":"image_url"}]}]}`, wantStatus: 400,
			wantMessage: "messages[0].content: image_url part without url"},
		{name: "missing prompt", path: pathCompletionsRender, body: `{}`, wantStatus: 400, wantMessage: "prompt: field required"},
		{name: "bad prompt", path: pathCompletionsRender, body: `{"prompt":[{}]}`, wantStatus: 400, wantMessage: "prompt[0]: must be"},
		{name: "unknown path", path: "/v1/render", body: `{}`, wantStatus: 404, wantMessage: "Not Found"},
		{name: "strict request id", path: pathChatRender, body: `{"messages":[]}`, header: legHeader("", ""), wantStatus: 400,
			wantMessage: "sim: " + ruleRequestID},
	}
	e := strictEnv(t)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := tc.header
			if h == nil {
				h = legHeader("", "re-1")
			}
			resp := post(t, e.render.URL+tc.path, h, tc.body)
			require.Equal(t, tc.wantStatus, resp.status, "body: %s", resp.body)
			got := errorOf(t, resp.body).Message
			assert.True(t, strings.HasPrefix(got, tc.wantMessage), "message %q", got)
		})
	}
}

func TestRenderMethodNotAllowed(t *testing.T) {
	t.Parallel()
	e := strictEnv(t)
	resp := doRequest(t, t.Context(), http.MethodGet, e.render.URL+pathChatRender, legHeader("", "m-1"), "")
	assert.Equal(t, http.StatusMethodNotAllowed, resp.status)
}
