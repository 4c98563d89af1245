package media

import "fmt"

// b64 marks the bytes of the standard base64 alphabet (RFC 4648 §4).
var b64 = func() (t [256]uint8) {
	for _, c := range "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/" {
		t[c] = 1
	}
	return t
}()

// checkBase64 reports where payload stops being what vLLM decodes an
// inlined image with (pybase64.b64decode(data, validate=True), as
// Python's base64 with validate=True): the standard alphabet only (no
// whitespace, no URL-safe "-_", no percent-encoding), in whole groups of
// four characters, '=' only as the last one or two characters to pad the
// last group. Bits past the data in the last group need not be zero
// (Python does not check them). The one place this is stricter than
// Python: a '=' after a complete last group ("QUJD=", which no encoder
// writes) is refused. It reads each byte at most once, allocates nothing
// unless it fails, and stops at the first bad byte; offset is the byte's
// index in payload (len(payload) for a bad length).
func checkBase64(payload string) (offset int, err error) {
	n := len(payload)
	i := 0
	// Eight bytes at a time while all are in the alphabet: one branch per
	// word instead of one per byte.
	for ; i+8 <= n; i += 8 {
		p := payload[i : i+8]
		if b64[p[0]]&b64[p[1]]&b64[p[2]]&b64[p[3]]&b64[p[4]]&b64[p[5]]&b64[p[6]]&b64[p[7]] == 0 {
			break
		}
	}
	padded := false
	for ; i < n; i++ {
		c := payload[i]
		switch {
		case b64[c] == 1 && !padded:
		case b64[c] == 1:
			return i, fmt.Errorf("data after padding '='")
		case c == '=' && i >= n-2 && i%4 >= 2:
			padded = true
		case c == '=':
			return i, fmt.Errorf("misplaced padding '='")
		default:
			return i, fmt.Errorf("%q is not in the base64 alphabet (A-Z a-z 0-9 + /)", payload[i:i+1])
		}
	}
	if n%4 != 0 {
		return n, fmt.Errorf("length %d is not a multiple of 4 (padding missing?)", n)
	}
	return 0, nil
}
