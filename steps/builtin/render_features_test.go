package builtin_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/internal/gateway"
	"github.com/coordinator-project/coordinator/internal/wire/features"
	"github.com/coordinator-project/coordinator/internal/wire/legs"
	"github.com/coordinator-project/coordinator/steps"
	"github.com/coordinator-project/coordinator/steps/steptest"
)

// sixteenTokens is a prompt long enough for every placeholder of the
// features table.
const sixteenTokens = `[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15]`

func entry(i int, hash, kwargs string, offset, length int) features.MultimodalEntry {
	return features.MultimodalEntry{Index: i, Hash: hash, KwargsData: json.RawMessage(kwargs),
		Placeholder: features.Placeholder{Offset: offset, Length: length}}
}

// featuresCases are the shapes of a "features" value (compat §10.7
// ExtractMultimodalEntries): features is its JSON text, "" for absent.
var featuresCases = []struct {
	name     string
	features string
	want     []features.MultimodalEntry
	wantErr  string
}{
	{name: "absent features is text-only", features: ""},
	{name: "null features is text-only", features: `null`},
	{name: "empty features is text-only", features: `{}`},
	{name: "null mm_hashes is text-only", features: `{"mm_hashes":null}`},
	{name: "non-image modality only is text-only", features: `{"mm_hashes":{"audio":["a"]},"mm_placeholders":{"audio":[{"offset":1,"length":1}]}}`},
	{name: "null image hashes is text-only", features: `{"mm_hashes":{"image":null}}`},
	{name: "empty image hashes is text-only", features: `{"mm_hashes":{"image":[]},"mm_placeholders":{"image":[]},"kwargs_data":{"image":[]}}`},
	{
		name:     "single image",
		features: `{"mm_hashes":{"image":["abc123"]},"mm_placeholders":{"image":[{"offset":1,"length":3}]},"kwargs_data":{"image":["tensordata"]}}`,
		want:     []features.MultimodalEntry{entry(0, "abc123", `"tensordata"`, 1, 3)},
	},
	{
		name: "two images in order",
		features: `{"mm_hashes":{"image":["hash1","hash2"]},"mm_placeholders":{"image":[{"offset":1,"length":3},{"offset":5,"length":2}]},` +
			`"kwargs_data":{"image":["d1","d2"]}}`,
		want: []features.MultimodalEntry{entry(0, "hash1", `"d1"`, 1, 3), entry(1, "hash2", `"d2"`, 5, 2)},
	},
	{
		name:     "other modalities are ignored next to images",
		features: `{"mm_hashes":{"audio":[1],"image":["h"]},"mm_placeholders":{"image":[{"offset":0,"length":1}],"audio":"x"}}`,
		want:     []features.MultimodalEntry{entry(0, "h", `null`, 0, 1)},
	},
	{
		name:     "absent kwargs_data resolves every image from the encoder cache",
		features: `{"mm_hashes":{"image":["abc123"]},"mm_placeholders":{"image":[{"offset":1,"length":3}]}}`,
		want:     []features.MultimodalEntry{entry(0, "abc123", `null`, 1, 3)},
	},
	{
		name:     "null kwargs_data counts as absent",
		features: `{"mm_hashes":{"image":["abc123"]},"mm_placeholders":{"image":[{"offset":1,"length":3}]},"kwargs_data":null}`,
		want:     []features.MultimodalEntry{entry(0, "abc123", `null`, 1, 3)},
	},
	{
		name: "mixed batch keeps a null kwargs item",
		features: `{"mm_hashes":{"image":["hash1","hash2"]},"mm_placeholders":{"image":[{"offset":1,"length":3},{"offset":4,"length":3}]},` +
			`"kwargs_data":{"image":["dGVuc29y",null]}}`,
		want: []features.MultimodalEntry{entry(0, "hash1", `"dGVuc29y"`, 1, 3), entry(1, "hash2", `null`, 4, 3)},
	},
	{
		name:     "integral float placeholder values",
		features: `{"mm_hashes":{"image":["h"]},"mm_placeholders":{"image":[{"offset":1.0,"length":2e0}]}}`,
		want:     []features.MultimodalEntry{entry(0, "h", `null`, 1, 2)},
	},
	{name: "features string", features: `"garbage"`, wantErr: "features must be an object"},
	{name: "features array", features: `[1]`, wantErr: "features must be an object"},
	{name: "features number", features: `42`, wantErr: "features must be an object"},
	{name: "mm_hashes not an object", features: `{"mm_hashes":"garbage"}`, wantErr: "mm_hashes must be an object"},
	{name: "mm_hashes image not an array", features: `{"mm_hashes":{"image":"garbage"}}`, wantErr: "mm_hashes.image must be an array"},
	{name: "hash not a string", features: `{"mm_hashes":{"image":[7]},"mm_placeholders":{"image":[{"offset":0,"length":1}]}}`, wantErr: "mm_hashes.image[0] must be a string"},
	{name: "mm_placeholders absent", features: `{"mm_hashes":{"image":["h"]}}`, wantErr: "mm_placeholders.image is required"},
	{name: "mm_placeholders null", features: `{"mm_hashes":{"image":["h"]},"mm_placeholders":null}`, wantErr: "mm_placeholders.image is required"},
	{name: "mm_placeholders without image", features: `{"mm_hashes":{"image":["h"]},"mm_placeholders":{"audio":[]}}`, wantErr: "mm_placeholders.image is required"},
	{name: "mm_placeholders not an object", features: `{"mm_hashes":{"image":["h"]},"mm_placeholders":"garbage"}`, wantErr: "mm_placeholders must be an object"},
	{name: "mm_placeholders image not an array", features: `{"mm_hashes":{"image":["h"]},"mm_placeholders":{"image":{}}}`, wantErr: "mm_placeholders.image must be an array"},
	{
		name:     "fewer placeholders than hashes",
		features: `{"mm_hashes":{"image":["hash1","hash2"]},"mm_placeholders":{"image":[{"offset":1,"length":3}]},"kwargs_data":{"image":["d1","d2"]}}`,
		wantErr:  "mm_hashes.image has 2, mm_placeholders.image has 1",
	},
	{
		name: "fewer kwargs than hashes",
		features: `{"mm_hashes":{"image":["hash1","hash2"]},"mm_placeholders":{"image":[{"offset":1,"length":3},{"offset":4,"length":3}]},` +
			`"kwargs_data":{"image":["d1"]}}`,
		wantErr: "mm_hashes.image has 2, kwargs_data.image has 1",
	},
	{name: "placeholder not an object", features: `{"mm_hashes":{"image":["h"]},"mm_placeholders":{"image":[[1,3]]}}`, wantErr: "mm_placeholders.image[0] must be an object"},
	{name: "negative offset", features: `{"mm_hashes":{"image":["h"]},"mm_placeholders":{"image":[{"offset":-1,"length":3}]}}`, wantErr: "mm_placeholders.image[0].offset must be a non-negative integer"},
	{name: "negative length", features: `{"mm_hashes":{"image":["h"]},"mm_placeholders":{"image":[{"offset":1,"length":-3}]}}`, wantErr: "mm_placeholders.image[0].length must be a non-negative integer"},
	{name: "missing offset", features: `{"mm_hashes":{"image":["h"]},"mm_placeholders":{"image":[{"length":3}]}}`, wantErr: "offset must be a non-negative integer"},
	{name: "fractional length", features: `{"mm_hashes":{"image":["h"]},"mm_placeholders":{"image":[{"offset":1,"length":1.5}]}}`, wantErr: "length must be a non-negative integer"},
	{name: "string offset", features: `{"mm_hashes":{"image":["h"]},"mm_placeholders":{"image":[{"offset":"1","length":1}]}}`, wantErr: "offset must be a non-negative integer"},
	{name: "kwargs_data not an object", features: `{"mm_hashes":{"image":["h"]},"mm_placeholders":{"image":[{"offset":1,"length":3}]},"kwargs_data":"garbage"}`, wantErr: "kwargs_data must be an object"},
	{name: "kwargs_data image not an array", features: `{"mm_hashes":{"image":["h"]},"mm_placeholders":{"image":[{"offset":1,"length":3}]},"kwargs_data":{"image":"t"}}`, wantErr: "kwargs_data.image must be an array"},
	{name: "kwargs item a number", features: `{"mm_hashes":{"image":["h"]},"mm_placeholders":{"image":[{"offset":1,"length":3}]},"kwargs_data":{"image":[42]}}`, wantErr: "kwargs_data.image[0] must be a string or null"},
	{name: "kwargs item an object", features: `{"mm_hashes":{"image":["h"]},"mm_placeholders":{"image":[{"offset":1,"length":3}]},"kwargs_data":{"image":[{}]}}`, wantErr: "kwargs_data.image[0] must be a string or null"},
}

// TestFeaturesFromTheClient parses the features of a tokens-in body: a bad
// shape is the client's fault.
func TestFeaturesFromTheClient(t *testing.T) {
	t.Parallel()
	for _, tt := range featuresCases {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			body := `{"model":"m","token_ids":` + sixteenTokens
			if tt.features != "" {
				body += `,"features":` + tt.features
			}
			body += `}`
			rc := &steps.RequestContext{RequestID: "r", Format: legs.FormatGenerate, Body: []byte(body)}
			err := newRender(t, "http://127.0.0.1:1", nil).Execute(context.Background(), rc)
			if tt.wantErr != "" {
				require.ErrorIs(t, err, legs.ErrInvalidRequest)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, rc.Multimodal)
			assert.Len(t, rc.Tokens.IDs(), 16)
			assert.Equal(t, body, string(editedBody(rc)), "the generate body is left untouched")
		})
	}
}

// TestFeaturesFromRender parses the same shapes in render's answer to a chat
// render with no seeded entries (decision D7): a bad shape is render's
// fault, a plain error (502).
func TestFeaturesFromRender(t *testing.T) {
	t.Parallel()
	for _, tt := range featuresCases {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			answer := `{"request_id":"x","token_ids":` + sixteenTokens
			if tt.features != "" {
				answer += `,"features":` + tt.features
			}
			answer += `}`
			srv := renderServer(t, http.StatusOK, answer)
			rc := &steps.RequestContext{RequestID: "r", Format: legs.FormatChat, Body: []byte(`{"model":"m","messages":[]}`)}
			err := newRender(t, srv.URL, nil).Execute(context.Background(), rc)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.NotErrorIs(t, err, legs.ErrInvalidRequest, "render's answer is not the client's fault")
				var se *gateway.StatusError
				assert.False(t, errors.As(err, &se))
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, rc.Multimodal)
			assert.Len(t, rc.Tokens.IDs(), 16)
		})
	}
}

// TestPlaceholderBounds checks client placeholders against the prompt
// (compat §10.7 ValidatePlaceholderBounds), whatever the limits say.
func TestPlaceholderBounds(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		tokens       string
		placeholders string
		wantErr      string
	}{
		{name: "span fills the prompt", tokens: `[1,2,3,4]`, placeholders: `{"offset":0,"length":4}`},
		{name: "span ends at the last token", tokens: `[1,2,3,4]`, placeholders: `{"offset":3,"length":1}`},
		{name: "zero length in range", tokens: `[1,2,3,4]`, placeholders: `{"offset":3,"length":0}`},
		{name: "several spans in range", tokens: `[1,2,3,4]`, placeholders: `{"offset":0,"length":2},{"offset":2,"length":2}`},
		{name: "offset equals the token count", tokens: `[1,2,3,4]`, placeholders: `{"offset":4,"length":0}`, wantErr: "offset 4 out of range for 4 token_ids"},
		{name: "offset past the prompt", tokens: `[1,2,3,4]`, placeholders: `{"offset":5,"length":1}`, wantErr: "offset 5 out of range for 4 token_ids"},
		{name: "span one past the end", tokens: `[1,2,3,4]`, placeholders: `{"offset":2,"length":3}`, wantErr: "(offset 2, length 3) exceeds 4 token_ids"},
		{name: "huge length", tokens: `[1,2,3,4]`, placeholders: `{"offset":1,"length":9007199254740992}`, wantErr: "exceeds 4 token_ids"},
		{name: "max int length", tokens: `[1,2,3,4]`, placeholders: `{"offset":1,"length":9223372036854775807}`, wantErr: "exceeds 4 token_ids"},
		{name: "second span out of range", tokens: `[1,2,3,4]`, placeholders: `{"offset":0,"length":1},{"offset":9,"length":1}`, wantErr: "mm_placeholders.image[1].offset 9"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			n := strings.Count(tt.placeholders, "offset")
			hashes := strings.TrimSuffix(strings.Repeat(`"h",`, n), ",")
			body := `{"token_ids":` + tt.tokens + `,"features":{"mm_hashes":{"image":[` + hashes + `]},"mm_placeholders":{"image":[` + tt.placeholders + `]}}}`
			rc := &steps.RequestContext{RequestID: "r", Format: legs.FormatGenerate, Body: []byte(body)}
			err := newRender(t, "http://127.0.0.1:1", nil).Execute(context.Background(), rc)
			if tt.wantErr != "" {
				require.ErrorIs(t, err, legs.ErrInvalidRequest)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Len(t, rc.Multimodal, n)
		})
	}
}

// renderServer is a fake render service answering status and body (JSON).
func renderServer(t *testing.T, status int, body string) *steptest.Gateway {
	t.Helper()
	return steptest.NewGateway(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	})
}
