package gateway

import (
	"io"
	"net"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A request's header and body pieces go out in one writev, in order, and
// a connection's next writes allocate nothing: the list of buffers is the
// connection's, and keeps no piece after the write.
func TestWriteHeadAndSendsInOrderWithoutAllocating(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	received := make(chan []byte, 1)
	go func() {
		sc, err := ln.Accept()
		if err != nil {
			received <- nil
			return
		}
		defer sc.Close()
		b, _ := io.ReadAll(sc)
		received <- b
	}()
	nc, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	c := newConn(nc, "test")

	body := [][]byte{[]byte("b1"), []byte("b2")}
	write := func() {
		c.head = append(c.head[:0], "H|"...)
		n, err := c.writeHeadAnd(body...)
		if err != nil || n != 4 {
			t.Errorf("writeHeadAnd: %d, %v", n, err)
		}
	}
	write()
	assert.Empty(t, c.head, "the header is dropped once sent")
	for _, b := range c.vec[:cap(c.vec)] {
		assert.Nil(t, b, "the list keeps no piece of the request")
	}
	allocs := testing.AllocsPerRun(10, write)
	require.NoError(t, nc.Close())
	assert.Zero(t, allocs, "allocations a write")
	// the first write, AllocsPerRun's warm-up and its 10 runs
	assert.Equal(t, strings.Repeat("H|b1b2", 12), string(<-received))
}
