//go:build !(linux || darwin || freebsd)

package h1

import "syscall"

// peekIdle cannot peek here: a kept connection the server closed fails
// the request sent on it.
func peekIdle(syscall.RawConn) bool { return true }
