//go:build !unix

package wsconn

import (
	"errors"
	"net"
	"syscall"
)

// rawConn: no direct writes here; SendFramed queues every frame.
func rawConn(net.Conn) syscall.RawConn { return nil }

func writeNow(syscall.RawConn, []byte) (int, error) {
	return 0, errors.New("wsconn: no direct writes on this platform")
}

func wouldBlock(error) bool { return false }
