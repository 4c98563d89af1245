package membudget

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestReadAll(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		size int
	}{
		{"empty", 0},
		{"one chunk", firstChunk - 1},
		{"exactly one chunk", firstChunk},
		{"several chunks", 3*lastChunk + 17},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := New(1<<30, 0)
			a := b.Open()
			ctx := WithAccount(context.Background(), a)
			want := bytes.Repeat([]byte("x"), tc.size)
			got, err := ReadAll(ctx, iotest.HalfReader(bytes.NewReader(want)), 1<<30)
			require.NoError(t, err)
			assert.Equal(t, want, got)
			if tc.size > firstChunk {
				assert.Equal(t, tc.size, cap(got), "one exact slice")
				assert.EqualValues(t, tc.size, a.Held(), "the chunks' draw given back")
			}
			assert.GreaterOrEqual(t, a.Held(), int64(tc.size))
			a.Close()
			assert.Zero(t, b.InUse())
		})
	}
}

// A reader that declares nothing and sends one byte holds one small chunk:
// nothing is allocated for what has not arrived.
func TestReadAllDrawsAsBytesArrive(t *testing.T) {
	t.Parallel()
	b := New(1<<30, 0)
	a := b.Open()
	got, err := ReadAll(WithAccount(context.Background(), a), strings.NewReader("x"), 64<<20)
	require.NoError(t, err)
	assert.Equal(t, "x", string(got))
	assert.EqualValues(t, firstChunk, a.Held())
	assert.LessOrEqual(t, cap(got), firstChunk)
}

func TestReadAllPastMax(t *testing.T) {
	t.Parallel()
	b := New(1<<30, 0)
	a := b.Open()
	r := io.LimitReader(zeros{}, 1<<40) // endless but for the limit
	_, err := ReadAll(WithAccount(context.Background(), a), r, 5<<20)
	require.ErrorIs(t, err, ErrTooLarge)
	assert.Zero(t, a.Held(), "what the read drew goes back")
	assert.LessOrEqual(t, b.Peak(), int64(5<<20+1), "no more than max and one byte is read")

	got, err := ReadAll(context.Background(), strings.NewReader("12345"), 5)
	require.NoError(t, err)
	assert.Equal(t, "12345", string(got))
	_, err = ReadAll(context.Background(), strings.NewReader("123456"), 5)
	require.ErrorIs(t, err, ErrTooLarge)
}

func TestReadAllRefusedByTheBudget(t *testing.T) {
	t.Parallel()
	b := New(1<<20, 0)
	a := b.Open()
	_, err := ReadAll(WithAccount(context.Background(), a), io.LimitReader(zeros{}, 4<<20), 64<<20)
	require.ErrorIs(t, err, ErrExhausted)
	assert.Zero(t, b.InUse())
	assert.EqualValues(t, 1, b.Refused())
}

func TestReadAllReaderError(t *testing.T) {
	t.Parallel()
	b := New(1<<30, time.Second)
	a := b.Open()
	_, err := ReadAll(WithAccount(context.Background(), a), iotest.ErrReader(io.ErrClosedPipe), 1<<20)
	require.ErrorIs(t, err, io.ErrClosedPipe)
	assert.Zero(t, b.InUse())
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// A body cut short (the reader's own io.ErrUnexpectedEOF) is an error, not
// an end.
func TestReadAllCutShort(t *testing.T) {
	t.Parallel()
	r := io.MultiReader(strings.NewReader("half"), iotest.ErrReader(io.ErrUnexpectedEOF))
	_, err := ReadAll(context.Background(), r, 1<<20)
	require.ErrorIs(t, err, io.ErrUnexpectedEOF)
}
