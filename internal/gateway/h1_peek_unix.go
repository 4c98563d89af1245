//go:build linux || darwin || freebsd

package gateway

import "syscall"

// peekIdle reports whether the kept connection raw is still open and
// silent: a peek that would block finds nothing to read, while an end of
// stream (the server closed it), an error or unsolicited bytes mean it is
// not to be used.
func peekIdle(raw syscall.RawConn) bool {
	alive := false
	err := raw.Read(func(fd uintptr) bool {
		var b [1]byte
		for {
			_, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
			if err == syscall.EINTR {
				continue
			}
			alive = err == syscall.EAGAIN || err == syscall.EWOULDBLOCK
			return true // never wait for the socket to be readable
		}
	})
	return alive && err == nil
}
