package builtin_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/internal/wire/legs"
)

// Golden files of every encode leg body, under testdata/encode/.
// Regenerate with go test ./steps -run EncodeGolden -update, then review
// the diff.

// TestEncodeGolden: the encode legs of the multimodal chat request in both
// wire formats (use_openai_format true: chat legs; false: generate legs),
// and of a completions request carrying images. Connectors do not shape
// encode legs.
func TestEncodeGolden(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		format    legs.Format
		useOpenAI bool
	}{
		{name: "chat", format: legs.FormatChat, useOpenAI: true},
		{name: "chat-tokens-in", format: legs.FormatChat, useOpenAI: false},
		{name: "completions", format: legs.FormatCompletions, useOpenAI: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			gw := workers(t)
			rc := mmChatContext()
			rc.Format = tt.format
			require.NoError(t, newEncode(t, gw.URL, map[string]any{"use_openai_format": tt.useOpenAI}).Execute(context.Background(), rc))
			sentLegs := gw.Legs()
			require.Len(t, sentLegs, 2)
			for i, hash := range []string{hash0, hash1} {
				name := fmt.Sprintf("encode/%s/leg%d", tt.name, i)
				goldenJSON(t, name, legByHash(t, sentLegs, hash).Body)
				goldenWire(t, name, legByHash(t, sentLegs, hash).Body)
			}
		})
	}
}
