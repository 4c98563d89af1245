package jsonbody

import (
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// The word-at-a-time digit helpers against a byte loop, with every byte
// value at every position of the word and numbers of every length.
func TestDigitRunEveryByte(t *testing.T) {
	t.Parallel()
	for p := range 12 {
		for b := range 256 {
			data := []byte(strings.Repeat("7", 12))
			data[p] = byte(b)
			want := 0
			for want < len(data) && isDigit(data[want]) {
				want++
			}
			assert.Equal(t, want, digitRun(data, 0, 100), "%q", data)
			assert.Equal(t, min(want, 3), digitRun(data, 0, 3), "%q", data)
		}
	}
}

func TestDigitsValue(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"0", "7", "10", "4096", "123456", "1234567", "12345678", "99999999", "123456789", "4294967295", "0012"} {
		for _, tail := range []string{"", ",", "]123456789"} {
			data := []byte(s + tail)
			want, err := strconv.ParseUint(s, 10, 64)
			assert.NoError(t, err)
			assert.Equal(t, want, digitsValue(data, 0, len(s)), "%q", data)
		}
	}
}

func TestUint32At(t *testing.T) {
	t.Parallel()
	ids := make([]uint32, 300)
	for i := range ids {
		ids[i] = uint32(i * i * 7919 % 4294967291)
	}
	raw := AppendUint32s(nil, ids)
	for i, want := range ids {
		got, ok := Uint32At(raw, i)
		assert.True(t, ok, "index %d", i)
		assert.Equal(t, want, got, "index %d", i)
	}
	for _, tt := range []struct {
		raw string
		i   int
	}{{`[1,2]`, 2}, {`[1,2]`, -1}, {`[]`, 0}, {`[1, 2]`, 1}, {`x`, 0}, {``, 0}} {
		_, ok := Uint32At([]byte(tt.raw), tt.i)
		assert.False(t, ok, "%s [%d]", tt.raw, tt.i)
	}
}

func TestCommasExact(t *testing.T) {
	t.Parallel()
	for p := range 8 {
		for b := range 256 {
			word := []byte(",,,,,,,,")
			word[p] = byte(b)
			m := commas(uint64(word[0]) | uint64(word[1])<<8 | uint64(word[2])<<16 | uint64(word[3])<<24 |
				uint64(word[4])<<32 | uint64(word[5])<<40 | uint64(word[6])<<48 | uint64(word[7])<<56)
			for k := range 8 {
				assert.Equal(t, word[k] == ',', m>>(8*k+7)&1 == 1, "byte %d of %q", k, word)
			}
		}
	}
}
