//go:build unix

package app

import (
	"fmt"
	"syscall"
	"testing"
)

// refusedAddr is a loopback address that refuses connections for the
// rest of the test: a socket bound to it without listening, so that the
// kernel answers a connection with a reset and gives the port to no one
// else. A listener opened and closed to free a port does not hold it:
// the next listener (the test's own mute server, once in CI) may get it,
// and the dial then times out instead of being refused.
func refusedAddr(t *testing.T) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port)
}
