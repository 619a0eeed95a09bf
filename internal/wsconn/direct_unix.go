//go:build unix

package wsconn

import (
	"errors"
	"net"
	"syscall"
)

// rawConn is nc's syscall.RawConn when nc is a socket that offers one
// (a TCP connection, or a wrapper that passes its SyscallConn on; not
// TLS), else nil.
func rawConn(nc net.Conn) syscall.RawConn {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	return rc
}

// writeNow makes one non-blocking write of b to the socket: it never
// waits for the socket to take more.
func writeNow(rc syscall.RawConn, b []byte) (int, error) {
	var n int
	var werr error
	err := rc.Write(func(fd uintptr) bool {
		n, werr = syscall.Write(int(fd), b)
		return true
	})
	if n < 0 {
		n = 0
	}
	if err != nil {
		return n, err
	}
	return n, werr
}

// wouldBlock says the socket took nothing now, without failing.
func wouldBlock(err error) bool {
	return errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EWOULDBLOCK) || errors.Is(err, syscall.EINTR)
}
