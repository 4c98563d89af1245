package steptest

import (
	"io"
	"net"
	"sync"
	"testing"
)

// SilentRedis is a Redis that hangs: a 127.0.0.1 listener that accepts
// connections, reads what is sent and never answers. It returns the
// redis:// URL; listener and connections close when the test ends.
func SilentRedis(t testing.TB) string {
	return deadRedis(t, func(c net.Conn) { _, _ = io.Copy(io.Discard, c) })
}

// HangUpRedis is a port where no Redis answers: a 127.0.0.1 listener that
// closes every connection as soon as it accepts it (unlike a closed port,
// nobody else can take it meanwhile). It returns the redis:// URL.
func HangUpRedis(t testing.TB) string {
	return deadRedis(t, func(net.Conn) {})
}

// deadRedis accepts connections on a loopback listener and runs serve on
// each, then closes it.
func deadRedis(t testing.TB, serve func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("dead redis: %v", err)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns = map[net.Conn]struct{}{}
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns[c] = struct{}{}
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				serve(c)
				_ = c.Close()
			}()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return "redis://" + ln.Addr().String()
}
