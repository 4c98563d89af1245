package gateway_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/coordinator-project/coordinator/internal/gateway"
)

// statusServer answers every request with the raw status line "HTTP/1.1
// <code> X", an empty body, and keeps the connection; net/http's server
// cannot write a status below 100.
func statusServer(t *testing.T, code string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					_, _ = io.Copy(io.Discard, req.Body)
					if _, err := io.WriteString(c, "HTTP/1.1 "+code+" X\r\nContent-Length: 0\r\n\r\n"); err != nil {
						return
					}
				}
			}()
		}
	}()
	return "http://" + ln.Addr().String()
}

// TestAStatusOutsideTheHTTPRangeIsATransportError: a worker answering a
// status outside 100-599 (which http.ReadResponse takes) fails the leg
// with a *TransportError (a 502 to the client), never a *StatusError whose
// status a decode leg would relay; the passthrough alike.
func TestAStatusOutsideTheHTTPRangeIsATransportError(t *testing.T) {
	t.Parallel()
	for _, code := range []string{"000", "099", "600", "999"} {
		t.Run(code, func(t *testing.T) {
			t.Parallel()
			c, err := gateway.New(gateway.Options{Address: statusServer(t, code)})
			require.NoError(t, err)
			t.Cleanup(c.Close)
			n, _ := strconv.Atoi(code)
			want := "answer status outside 100-599: " + strconv.Itoa(n)

			_, err = c.Post(context.Background(), gateway.Request{Leg: "decode", Path: "/v1/completions", Profile: gateway.ProfileDecode, Body: []byte(`{}`)})
			var te *gateway.TransportError
			require.ErrorAs(t, err, &te)
			assert.Equal(t, "decode", te.Leg)
			assert.ErrorIs(t, err, gateway.ErrInvalidStatus)
			assert.EqualError(t, err, "decode: "+want)
			var se *gateway.StatusError
			assert.False(t, errors.As(err, &se), "no status to relay")

			resp, err := c.Forward(context.Background(), gateway.ForwardRequest{Method: http.MethodGet, Target: "/v1/models"})
			if resp != nil {
				resp.Body.Close()
			}
			require.ErrorAs(t, err, &te)
			assert.EqualError(t, err, "passthrough: "+want)
		})
	}
}
