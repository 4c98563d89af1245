package jsonbody

import (
	"encoding/binary"
	"math/bits"
)

// nonDigits returns a non-zero word when one of the eight bytes of x
// (little endian) is not an ASCII digit; its lowest set bit is the high
// bit of the first such byte (higher bits may be false positives caused
// by borrows, which never propagate downwards).
func nonDigits(x uint64) uint64 {
	below := (x - lsbs*'0') &^ x       // bytes < '0' (among those < 0x80)
	above := (x + lsbs*(0x7f-'9')) | x // bytes > '9', or >= 0x80
	return (below | above) & msbs
}

// digitRun returns the number of ASCII digits at data[i:], counting at
// most limit of them (the run may be longer).
func digitRun(data []byte, i, limit int) int {
	if i+8 <= len(data) { // the common case in one word, inlined
		if m := nonDigits(binary.LittleEndian.Uint64(data[i:])); m != 0 {
			return min(bits.TrailingZeros64(m)>>3, limit)
		}
	}
	return digitRunLong(data, i, limit)
}

// digitRunLong is digitRun past the first word.
func digitRunLong(data []byte, i, limit int) int {
	n := 0
	for n < limit && i+8 <= len(data) {
		if m := nonDigits(binary.LittleEndian.Uint64(data[i:])); m != 0 {
			return min(n+bits.TrailingZeros64(m)>>3, limit)
		}
		n, i = n+8, i+8
	}
	for n < limit && i < len(data) && isDigit(data[i]) {
		n, i = n+1, i+1
	}
	return min(n, limit)
}

// digitsValue returns the value of the n (1 to 10) ASCII digits at
// data[i:].
func digitsValue(data []byte, i, n int) uint64 {
	if n <= 8 && i+8 <= len(data) {
		// The n digits to the top of the word, '0's below them, then the
		// eight-digit conversion of Lemire's "fast_float".
		x := binary.LittleEndian.Uint64(data[i:]) << (8 * (8 - n))
		x |= lsbs * '0' >> (8 * n)
		x -= lsbs * '0'
		x = x*10 + x>>8
		x = ((x&0x000000FF000000FF)*0x000F424000000064 + (x>>16&0x000000FF000000FF)*0x0000271000000001) >> 32
		return x
	}
	var v uint64
	for _, c := range data[i : i+n] {
		v = v*10 + uint64(c-'0')
	}
	return v
}

// Uint32At returns element i of raw, an array of token IDs written as
// [AppendUint32s] writes them (no whitespace, plain digits: see
// Uint32Stats.Canonical), without decoding the others: it finds the
// element by counting commas a word at a time. It reports false when i is
// out of range or raw is not so written at that element.
func Uint32At(raw []byte, i int) (uint32, bool) {
	if len(raw) < 2 || raw[0] != '[' || i < 0 {
		return 0, false
	}
	at := 1
	if i > 0 {
		if at = afterNthComma(raw, i); at < 0 {
			return 0, false
		}
	}
	v, _, ok := plainUint32(raw, at)
	return v, ok
}

// afterNthComma returns the index just past the n-th comma (n >= 1) of
// raw, or -1 when raw has fewer.
func afterNthComma(raw []byte, n int) int {
	i := 0
	for ; i+8 <= len(raw); i += 8 {
		m := commas(binary.LittleEndian.Uint64(raw[i:]))
		c := bits.OnesCount64(m)
		if c < n {
			n -= c
			continue
		}
		for ; n > 1; n-- {
			m &= m - 1 // drop the lowest comma
		}
		return i + bits.TrailingZeros64(m)>>3 + 1
	}
	for ; i < len(raw); i++ {
		if raw[i] == ',' {
			if n--; n == 0 {
				return i + 1
			}
		}
	}
	return -1
}

// commas has the high bit set in exactly the bytes of x that are ','.
func commas(x uint64) uint64 {
	const low7 = 0x7f7f7f7f7f7f7f7f
	t := x ^ lsbs*','
	return ^((t&low7 + low7) | t | low7)
}
