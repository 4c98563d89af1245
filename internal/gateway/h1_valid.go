package gateway

import (
	"errors"
	"fmt"
	"net/http"

	"golang.org/x/net/http/httpguts"
)

// valid refuses a request net/http's Transport refuses, before anything is
// sent: a method that is not a token, a header or trailer field name that
// is not one, a value holding a control character (NUL, CR, LF...).
// http.Request's writer drops an invalid name without a word and sends a
// NUL as it is: checked here, neither reaches the gateway.
func valid(req *http.Request) error {
	if req.Header == nil {
		return errors.New("h1: nil request header")
	}
	if m := req.Method; m != "" && !validMethod(m) {
		return fmt.Errorf("h1: invalid method %q", m)
	}
	if err := validFields(req.Header); err != "" {
		return errors.New("h1: invalid header " + err)
	}
	if err := validFields(req.Trailer); err != "" {
		return errors.New("h1: invalid trailer " + err)
	}
	return nil
}

// validFields names h's first invalid field, "" when all are valid. A
// value is never quoted: it may be a secret.
func validFields(h http.Header) string {
	for k, vv := range h {
		if !httpguts.ValidHeaderFieldName(k) {
			return fmt.Sprintf("field name %q", k)
		}
		for _, v := range vv {
			if !httpguts.ValidHeaderFieldValue(v) {
				return fmt.Sprintf("field value for %q", k)
			}
		}
	}
	return ""
}

// validMethod reports whether m is a token (RFC 9110 §9.1).
func validMethod(m string) bool {
	for i := 0; i < len(m); i++ {
		if !httpguts.IsTokenRune(rune(m[i])) {
			return false
		}
	}
	return true
}
