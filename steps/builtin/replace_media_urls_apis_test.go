package builtin_test

import (
	"encoding/base64"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/internal/wire/features"
	"github.com/coordinator-project/coordinator/internal/wire/legs"
	"github.com/coordinator-project/coordinator/steps"
	"github.com/coordinator-project/coordinator/steps/builtin"
)

// The image inputs of the OpenAI Responses API (input_image parts with an
// image_url string) and of the Anthropic Messages API (image blocks with a
// url or base64 source) go through replace-media-urls like chat's: the
// same SSRF guard and limits, downloaded images inlined in the API's own
// shape, data inputs seeded as they are.

func responsesImage(url string) string {
	return fmt.Sprintf(`{"type":"input_image","image_url":%q,"detail":"auto"}`, url)
}

func messagesURLImage(url string) string {
	return fmt.Sprintf(`{"type":"image","source":{"type":"url","url":%q},"cache_control":{"type":"ephemeral"}}`, url)
}

func messagesBase64Image(mediaType string, data []byte) string {
	return fmt.Sprintf(`{"type":"image","source":{"type":"base64","media_type":%q,"data":%q}}`, mediaType, base64.StdEncoding.EncodeToString(data))
}

func responsesBody(parts ...string) []byte {
	return []byte(`{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":"what is this?"},` + strings.Join(parts, ",") + `]}],"max_output_tokens":8}`)
}

func messagesBody(parts ...string) []byte {
	return []byte(`{"model":"m","max_tokens":8,"messages":[{"role":"user","content":[{"type":"text","text":"what is this?"},` + strings.Join(parts, ",") + `]}]}`)
}

func apiContext(f legs.Format, body []byte) *steps.RequestContext {
	return &steps.RequestContext{RequestID: "req-1", Format: f, Body: body}
}

func TestReplaceMediaURLsResponsesAndMessages(t *testing.T) {
	t.Parallel()
	o := newMediaOrigin(t, serveImage("image/png", mediaPNG))
	png64 := base64.StdEncoding.EncodeToString(mediaPNG)
	gif64 := base64.StdEncoding.EncodeToString(mediaGIF)
	for _, tc := range []struct {
		name   string
		f      legs.Format
		body   []byte
		golden string
		want   string // the body after the step
	}{
		{
			name: "responses", f: legs.FormatResponses, golden: "replace-media-urls/responses_body",
			body: responsesBody(responsesImage(o.URL+"/cat.png"), responsesImage(mediaDataURI("image/gif", mediaGIF))),
			want: `{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":"what is this?"},` +
				`{"type":"input_image","image_url":"data:image/png;base64,` + png64 + `","detail":"auto"},` +
				responsesImage(mediaDataURI("image/gif", mediaGIF)) + `]}],"max_output_tokens":8}`,
		},
		{
			name: "messages", f: legs.FormatMessages, golden: "replace-media-urls/messages_body",
			body: messagesBody(messagesURLImage(o.URL+"/cat.png"), messagesBase64Image("image/gif", mediaGIF)),
			want: `{"model":"m","max_tokens":8,"messages":[{"role":"user","content":[{"type":"text","text":"what is this?"},` +
				`{"type":"image","source":{"type":"base64","media_type":"image/png","data":"` + png64 + `"},"cache_control":{"type":"ephemeral"}},` +
				messagesBase64Image("image/gif", mediaGIF) + `]}]}`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rc := apiContext(tc.f, tc.body)
			require.NoError(t, execMedia(newReplaceMedia(t, nil), rc))
			assert.Equal(t, tc.want, string(editedBody(rc)), "the downloaded image inlined in the API's shape, the rest as sent")
			goldenWire(t, tc.golden, editedBody(rc))
			assert.Equal(t, []features.MultimodalEntry{
				{Index: 0, ContentType: "image/png", Base64Data: png64},
				{Index: 1, ContentType: "image/gif", Base64Data: gif64},
			}, rc.Multimodal)
		})
	}
	t.Cleanup(func() { assert.Equal(t, int32(2), o.hits.Load()) })
}

func TestReplaceMediaURLsResponsesAndMessagesRefusals(t *testing.T) {
	t.Parallel()
	o := newMediaOrigin(t, serveImage("image/png", mediaPNG))
	port := o.Listener.Addr().(interface{ AddrPort() netip.AddrPort }).AddrPort().Port()
	for _, tc := range []struct {
		name   string
		f      legs.Format
		body   []byte
		params map[string]any
		msg    string
	}{
		{"responses metadata address", legs.FormatResponses, responsesBody(responsesImage("http://169.254.169.254/latest/")), nil,
			"address 169.254.169.254 is not allowed: link-local (in input[0].content[1].image_url)"},
		{"messages loopback", legs.FormatMessages, messagesBody(messagesURLImage(fmt.Sprintf("http://localhost:%d/a.png", port))), nil,
			"is not allowed: loopback (in messages[0].content[1].source)"},
		{"messages base64 not an image", legs.FormatMessages, messagesBody(messagesBase64Image("text/html", []byte("<h1>"))), nil,
			`media type "text/html" is not an allowed image type (in messages[0].content[1].source)`},
		{"responses over the entry limit", legs.FormatResponses,
			responsesBody(responsesImage(o.URL+"/1"), responsesImage(o.URL+"/2"), responsesImage(o.URL+"/3")),
			map[string]any{"max_multimodal_entries": 2}, "too many multimodal entries: got 3, max 2"},
		{"messages over the entry limit", legs.FormatMessages,
			messagesBody(messagesURLImage(o.URL+"/1"), messagesURLImage(o.URL+"/2"), messagesURLImage(o.URL+"/3")),
			map[string]any{"max_multimodal_entries": 2}, "too many multimodal entries: got 3, max 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			step := newReplaceMedia(t, tc.params)
			if tc.params == nil {
				var err error
				step, err = builtin.NewReplaceMediaURLsPlugin().New(nil) // the production address policy
				require.NoError(t, err)
			}
			err := execMedia(step, apiContext(tc.f, tc.body))
			require.ErrorIs(t, err, legs.ErrInvalidRequest)
			assert.Contains(t, err.Error(), tc.msg)
		})
	}
	t.Cleanup(func() { assert.Zero(t, o.hits.Load(), "refused before any download") })
}

func TestReplaceMediaURLsImageOverTheSizeLimit(t *testing.T) {
	t.Parallel()
	big := append(append([]byte(nil), mediaPNG...), make([]byte, 2<<20)...)
	o := newMediaOrigin(t, serveImage("image/png", big))
	for _, tc := range []struct {
		f    legs.Format
		body []byte
	}{
		{legs.FormatResponses, responsesBody(responsesImage(o.URL + "/big.png"))},
		{legs.FormatMessages, messagesBody(messagesURLImage(o.URL + "/big.png"))},
	} {
		err := execMedia(newReplaceMedia(t, map[string]any{"max_download_size": 1}), apiContext(tc.f, tc.body))
		require.ErrorIs(t, err, legs.ErrInvalidRequest, tc.f.String())
		assert.Contains(t, err.Error(), "downloading image 0: ", tc.f.String())
	}
}
