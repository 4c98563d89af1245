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
			got, err := ReadAll(ctx, iotest.HalfReader(bytes.NewReader(want)), -1, 1<<30)
			require.NoError(t, err)
			assert.Equal(t, want, got)
			assert.Equal(t, tc.size, cap(got), "one exact slice")
			assert.EqualValues(t, tc.size, a.Held(), "the chunks' draw given back")
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
	got, err := ReadAll(WithAccount(context.Background(), a), strings.NewReader("x"), -1, 64<<20)
	require.NoError(t, err)
	assert.Equal(t, "x", string(got))
	assert.EqualValues(t, 1, a.Held())
	assert.Equal(t, 1, cap(got))
	assert.LessOrEqual(t, b.Peak(), int64(smallChunk+1))
}

// A declared length is trusted only as far as bytes back it: up to 32 KiB
// it is read straight into its slice; past that, once an eighth of it has
// arrived, into one slice of its size, so the peak is 1.125 times the body
// and the result is one exact slice.
func TestReadAllDeclared(t *testing.T) {
	t.Parallel()
	for _, size := range []int{0, 1, 200, firstChunk, firstChunk + 1, 3*lastChunk + 17} {
		b := New(1<<30, 0)
		a := b.Open()
		want := bytes.Repeat([]byte("y"), size)
		got, err := ReadAll(WithAccount(context.Background(), a), iotest.HalfReader(bytes.NewReader(want)), int64(size), 1<<30)
		require.NoError(t, err, size)
		assert.Equal(t, want, got, size)
		assert.Equal(t, size, cap(got), "%d: one exact slice", size)
		assert.EqualValues(t, size, a.Held(), "%d: the chunks' draw given back", size)
		assert.LessOrEqual(t, b.Peak(), int64(size)+int64(size)/8+firstChunk, "%d: peak", size)
	}
}

// An announcement costs at most eight times the bytes sent: a reader that
// declares 64 MiB and sends one byte holds one chunk of 32 KiB.
func TestReadAllDeclaredButNotSent(t *testing.T) {
	t.Parallel()
	b := New(1<<30, 0)
	a := b.Open()
	r := io.MultiReader(strings.NewReader("{"), iotest.ErrReader(io.ErrUnexpectedEOF))
	_, err := ReadAll(WithAccount(context.Background(), a), r, 64<<20, 64<<20)
	require.ErrorIs(t, err, io.ErrUnexpectedEOF)
	assert.LessOrEqual(t, b.Peak(), int64(firstChunk))
	assert.Zero(t, b.InUse())

	short := strings.NewReader(strings.Repeat("z", 100))
	_, err = ReadAll(context.Background(), short, 200, 1<<20)
	require.ErrorIs(t, err, io.ErrUnexpectedEOF, "a body that ends short of its declared length")
	long := strings.NewReader(strings.Repeat("z", 300))
	_, err = ReadAll(context.Background(), long, 200, 1<<20)
	require.ErrorIs(t, err, ErrTooLarge, "a body that goes on past its declared length")
}

func TestReadAllPastMax(t *testing.T) {
	t.Parallel()
	b := New(1<<30, 0)
	a := b.Open()
	r := io.LimitReader(zeros{}, 1<<40) // endless but for the limit
	_, err := ReadAll(WithAccount(context.Background(), a), r, -1, 5<<20)
	require.ErrorIs(t, err, ErrTooLarge)
	assert.Zero(t, a.Held(), "what the read drew goes back")
	assert.LessOrEqual(t, b.Peak(), int64(5<<20+1), "no more than max and one byte is read")

	got, err := ReadAll(context.Background(), strings.NewReader("12345"), -1, 5)
	require.NoError(t, err)
	assert.Equal(t, "12345", string(got))
	_, err = ReadAll(context.Background(), strings.NewReader("123456"), -1, 5)
	require.ErrorIs(t, err, ErrTooLarge)
}

func TestReadAllRefusedByTheBudget(t *testing.T) {
	t.Parallel()
	b := New(1<<20, 0)
	a := b.Open()
	_, err := ReadAll(WithAccount(context.Background(), a), io.LimitReader(zeros{}, 4<<20), -1, 64<<20)
	require.ErrorIs(t, err, ErrExhausted)
	assert.Zero(t, b.InUse())
	assert.EqualValues(t, 1, b.Refused())
}

func TestReadAllReaderError(t *testing.T) {
	t.Parallel()
	b := New(1<<30, time.Second)
	a := b.Open()
	_, err := ReadAll(WithAccount(context.Background(), a), iotest.ErrReader(io.ErrClosedPipe), -1, 1<<20)
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
	_, err := ReadAll(context.Background(), r, -1, 1<<20)
	require.ErrorIs(t, err, io.ErrUnexpectedEOF)
}
