package main

import (
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// closedAfter fails every read once its reader is exhausted, like a server
// request body closed after the response headers went out.
type closedAfter struct{ r io.Reader }

func (c *closedAfter) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if err == io.EOF {
		return n, io.ErrClosedPipe
	}
	return n, err
}

func (c *closedAfter) Close() error { return nil }

func TestSizedBody(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		body string
		size int64
		want string
	}{
		{name: "exact size ends without another read", body: "hello world", size: 11, want: "hello world"},
		{name: "shorter size cuts the body", body: "hello world", size: 5, want: "hello"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := &sizedBody{ReadCloser: &closedAfter{r: strings.NewReader(tt.body)}, left: tt.size}
			got, err := io.ReadAll(b)
			require.NoError(t, err)
			assert.Equal(t, tt.want, string(got))
			n, err := b.Read(make([]byte, 8))
			assert.Zero(t, n)
			assert.ErrorIs(t, err, io.EOF, "reads past the size never reach the inbound body")
		})
	}
}
