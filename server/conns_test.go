package server

import (
	"net"
	"syscall"
	"testing"
)

// TestLimitedConnPassesSyscallConn: a connection accepted through
// LimitListener (as es serve accepts) still offers its socket's raw
// connection, which the hub's direct writes of live deltas need
// (wsconn.Conn.SendFramed); without it every row would go through a
// writer goroutine on a served connection.
func TestLimitedConnPassesSyscallConn(t *testing.T) {
	s := &Server{conns: newConnLimiter(0)}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ll := s.LimitListener(ln)
	cl, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	c, err := ll.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sc, ok := c.(syscall.Conn)
	if !ok {
		t.Fatalf("%T does not offer SyscallConn", c)
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var fd uintptr
	if err := rc.Control(func(f uintptr) { fd = f }); err != nil || fd == 0 {
		t.Fatalf("raw connection: fd %d, %v", fd, err)
	}
}
