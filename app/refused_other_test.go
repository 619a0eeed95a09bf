//go:build !unix

package app

import (
	"net"
	"testing"
)

// refusedAddr is a loopback address that refuses connections: a port
// freed by closing its listener (unix builds hold it with a bound socket;
// here another listener may take it).
func refusedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}
