package builtin_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/internal/wire/features"
	"github.com/coordinator-project/coordinator/internal/wire/legs"
	"github.com/coordinator-project/coordinator/steps"
	"github.com/coordinator-project/coordinator/steps/builtin"
)

// imagesAnswer is a chat render answer with n images.
func imagesAnswer(n int) string {
	hashes, placeholders := make([]string, n), make([]string, n)
	for i := range n {
		hashes[i] = fmt.Sprintf(`"h%d"`, i)
		placeholders[i] = fmt.Sprintf(`{"offset":%d,"length":1}`, i)
	}
	return `{"token_ids":[` + strings.TrimSuffix(strings.Repeat("7,", n), ",") + `],"features":{"mm_hashes":{"image":[` + strings.Join(hashes, ",") +
		`]},"mm_placeholders":{"image":[` + strings.Join(placeholders, ",") + `]}}}`
}

// Without a replace-media-urls step to count them first, the images render
// found are bounded by render's own max_multimodal_entries (default 64, 0
// unlimited) before any encode leg; entries a replace-media-urls step
// seeded (under its own bound) are not counted again.
func TestRenderBoundsTheImagesItSeeds(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		images  int
		seeded  bool
		params  map[string]any
		wantErr string
	}{
		{name: "at the default", images: builtin.DefaultMaxMultimodalEntries},
		{name: "past the default", images: builtin.DefaultMaxMultimodalEntries + 1, wantErr: "invalid request: too many multimodal entries: got 65, max 64"},
		{name: "past a configured bound", images: 3, params: map[string]any{"max_multimodal_entries": 2}, wantErr: "invalid request: too many multimodal entries: got 3, max 2"},
		{name: "unlimited", images: 200, params: map[string]any{"max_multimodal_entries": 0}},
		{name: "seeded by replace-media-urls", images: 100, seeded: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := renderServer(t, http.StatusOK, imagesAnswer(tt.images))
			rc := &steps.RequestContext{RequestID: "r", Format: legs.FormatChat, Body: []byte(`{"model":"m","messages":[]}`)}
			if tt.seeded {
				rc.Multimodal = make([]features.MultimodalEntry, tt.images)
				for i := range rc.Multimodal {
					rc.Multimodal[i].Index = i
				}
			}
			err := newRender(t, srv.URL, tt.params).Execute(context.Background(), rc)
			if tt.wantErr == "" {
				require.NoError(t, err)
				assert.Len(t, rc.Multimodal, tt.images)
				return
			}
			require.ErrorIs(t, err, legs.ErrInvalidRequest)
			assert.EqualError(t, err, tt.wantErr)
			assert.Empty(t, rc.Multimodal)
		})
	}
	_, err := builtin.NewRenderPlugin(builtin.RenderDeps{}).New(map[string]any{"address": "http://127.0.0.1:1", "max_multimodal_entries": -1})
	assert.ErrorContains(t, err, "max_multimodal_entries: must not be negative, got -1")
}
