package legs

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/internal/jsonbody"
)

func TestFlag(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, body string
		want       bool
		err        string
	}{
		{name: "missing", body: `{}`},
		{name: "null", body: `{"stream":null}`},
		{name: "true", body: `{"stream":true}`, want: true},
		{name: "string true", body: `{"stream":"true"}`, want: true},
		{name: "one", body: `{"stream":1}`, want: true},
		{name: "yes", body: `{"stream":"Yes"}`, want: true},
		{name: "off", body: `{"stream":"off"}`},
		{name: "two", body: `{"stream":2}`, err: `"stream" must be a boolean`},
		{name: "word", body: `{"stream":"sure"}`, err: `"stream" must be a boolean`},
		{name: "object", body: `{"stream":{}}`, err: `"stream" must be a boolean`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			obj, err := jsonbody.ParseObject([]byte(tt.body))
			require.NoError(t, err)
			got, err := Flag(obj, "stream")
			if tt.err != "" {
				require.ErrorIs(t, err, ErrInvalidRequest)
				assert.ErrorContains(t, err, tt.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestSpellFlag(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, body, want string
	}{
		{name: "string true", body: `{"stream":"yes","n":1}`, want: `{"stream":true,"n":1}`},
		{name: "one", body: `{"stream":1}`, want: `{"stream":true}`},
		{name: "string false", body: `{"stream":"Off"}`, want: `{"stream":false}`},
		{name: "zero", body: `{"stream":0.0}`, want: `{"stream":false}`},
		{name: "literal kept", body: `{ "stream" : true }`},
		{name: "null kept", body: `{"stream":null}`},
		{name: "missing", body: `{}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			obj, err := jsonbody.ParseObject([]byte(tt.body))
			require.NoError(t, err)
			v, err := Flag(obj, "stream")
			require.NoError(t, err)
			SpellFlag(obj, "stream", v)
			if tt.want == "" {
				assert.False(t, obj.Edited(), "left as sent")
				return
			}
			assert.Equal(t, tt.want, string(obj.AppendTo(nil)))
		})
	}
}
