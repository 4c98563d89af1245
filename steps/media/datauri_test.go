package media_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/steps/media"
)

func TestParseDataURI(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		uri       string
		mediaType string
		payload   string
		reason    error
		msg       string
	}{
		{name: "jpeg", uri: "data:image/jpeg;base64,/9j/4AAQ", mediaType: "image/jpeg", payload: "/9j/4AAQ"},
		{name: "png", uri: "data:image/png;base64,iVBORw0KGgo=", mediaType: "image/png", payload: "iVBORw0KGgo="},
		{name: "gif", uri: "data:image/gif;base64,R0lGOD", mediaType: "image/gif", payload: "R0lGOD"},
		{name: "webp", uri: "data:image/webp;base64,UklGR", mediaType: "image/webp", payload: "UklGR"},
		{name: "media type normalised", uri: "data:IMAGE/PNG ;base64,AAAA", mediaType: "image/png", payload: "AAAA"},
		{name: "scheme is case-insensitive", uri: "DATA:image/png;base64,AAAA", mediaType: "image/png", payload: "AAAA"},
		{name: "base64 among parameters, any case", uri: "data:image/png;name=a.png; BASE64 ;x=y,AAAA", mediaType: "image/png", payload: "AAAA"},
		{name: "payload not decoded or validated", uri: "data:image/png;base64,not base64!,with,commas", mediaType: "image/png", payload: "not base64!,with,commas"},
		{name: "empty media type", uri: "data:;base64,AAAA", reason: media.ErrDataURI, msg: "missing media type"},
		{name: "blank media type", uri: "data: ;base64,AAAA", reason: media.ErrDataURI, msg: "missing media type"},
		{name: "missing comma", uri: "data:image/png;base64", reason: media.ErrDataURI, msg: "missing comma"},
		{name: "missing base64", uri: "data:image/png,AAAA", reason: media.ErrDataURI, msg: "missing base64 parameter"},
		{name: "base64 as media type is not a parameter", uri: "data:base64,AAAA", reason: media.ErrDataURI, msg: "missing base64 parameter"},
		{name: "base64 only after the comma", uri: "data:image/png,;base64", reason: media.ErrDataURI, msg: "missing base64 parameter"},
		{name: "empty payload", uri: "data:image/png;base64,", reason: media.ErrDataURI, msg: "empty payload"},
		{name: "not an image", uri: "data:text/html;base64,PGgxPg==", reason: media.ErrNotImage, msg: `media type "text/html" is not an allowed image type`},
		{name: "svg refused", uri: "data:image/svg+xml;base64,PHN2Zz4=", reason: media.ErrNotImage, msg: `media type "image/svg+xml" is not an allowed image type`},
		{name: "not a data URI", uri: "http://example.com/a.png", reason: media.ErrDataURI, msg: "not a data URI"},
		{name: "empty", uri: "", reason: media.ErrDataURI, msg: "not a data URI"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			mediaType, payload, err := media.ParseDataURI(tt.uri)
			if tt.reason != nil {
				require.Error(t, err)
				assert.ErrorIs(t, err, tt.reason)
				assert.EqualError(t, err, tt.msg)
				var me *media.Error
				require.ErrorAs(t, err, &me)
				assert.True(t, me.ClientFault())
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.mediaType, mediaType)
			assert.Equal(t, tt.payload, payload)
		})
	}
}

func TestIsDataURI(t *testing.T) {
	t.Parallel()
	assert.True(t, media.IsDataURI("data:x"))
	assert.True(t, media.IsDataURI("Data:"))
	assert.False(t, media.IsDataURI("data"))
	assert.False(t, media.IsDataURI(" data:x"))
	assert.False(t, media.IsDataURI("https://x/data:"))
}
