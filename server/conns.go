package server

import (
	"container/list"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Connection limits. A connection counts as unauthenticated from accept
// until one of its requests passes auth (auth marks it through the
// request's context); at most MaxUnauthConns such connections are open:
// accepting one more closes the oldest. So a flood of idle or slow
// connections cannot exhaust the server's file descriptors, and a client
// with a token still gets in (its connection is the newest, and leaves
// the count as soon as its first request is authenticated). Silent
// connections are also closed after ReadHeaderTimeout, idle keep-alive
// ones after IdleTimeout.

// HTTPServer returns an http.Server for s.Handler() with the connection
// limits of Options.Conn. Serve it on a listener wrapped by
// s.LimitListener, or the unauthenticated cap is not enforced.
// Streaming routes (/v1/sync, /v1/files) get no write deadline; the
// others set theirs per request (route).
func (s *Server) HTTPServer() *http.Server {
	c := s.opts.Conn
	return &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: c.ReadHeaderTimeout,
		IdleTimeout:       c.IdleTimeout,
		MaxHeaderBytes:    64 << 10,
		ConnContext: func(ctx context.Context, nc net.Conn) context.Context {
			if tc, ok := nc.(*tls.Conn); ok {
				nc = tc.NetConn()
			}
			if lc, ok := nc.(*limitedConn); ok {
				return context.WithValue(ctx, connKey{}, lc)
			}
			return ctx
		},
	}
}

// LimitListener wraps ln so that HTTPServer's connections are counted
// against MaxUnauthConns.
func (s *Server) LimitListener(ln net.Listener) net.Listener {
	return &limitListener{Listener: ln, l: s.conns}
}

type connKey struct{}

// connLimiter tracks the unauthenticated connections, oldest first.
type connLimiter struct {
	max     int // 0: no cap
	mu      sync.Mutex
	unauth  list.List // of *limitedConn; guarded by mu
	evicted atomic.Int64
}

func newConnLimiter(max int) *connLimiter { return &connLimiter{max: max} }

// Unauthenticated is the number of open connections not yet authenticated.
func (l *connLimiter) unauthenticated() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.unauth.Len()
}

type limitListener struct {
	net.Listener
	l *connLimiter
}

func (ll *limitListener) Accept() (net.Conn, error) {
	c, err := ll.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l := ll.l
	lc := &limitedConn{Conn: c, l: l}
	var victim *limitedConn
	l.mu.Lock()
	lc.elem = l.unauth.PushBack(lc)
	if l.max > 0 && l.unauth.Len() > l.max {
		victim = l.unauth.Remove(l.unauth.Front()).(*limitedConn)
		victim.elem = nil
	}
	l.mu.Unlock()
	if victim != nil {
		l.evicted.Add(1)
		victim.Conn.Close()
	}
	return lc, nil
}

// limitedConn is a connection of a limitListener.
type limitedConn struct {
	net.Conn
	l    *connLimiter
	elem *list.Element // in l.unauth while unauthenticated; guarded by l.mu
}

// authenticated takes c out of the unauthenticated count.
func (c *limitedConn) authenticated() {
	c.l.mu.Lock()
	if c.elem != nil {
		c.l.unauth.Remove(c.elem)
		c.elem = nil
	}
	c.l.mu.Unlock()
}

func (c *limitedConn) Close() error {
	c.authenticated() // leaves the count either way
	return c.Conn.Close()
}

// SyscallConn passes the socket's raw connection on: the hub writes live
// deltas to it directly (wsconn.Conn.SendFramed), which a wrapper without
// it would turn into a writer goroutine's wakeup per row.
func (c *limitedConn) SyscallConn() (syscall.RawConn, error) {
	if sc, ok := c.Conn.(syscall.Conn); ok {
		return sc.SyscallConn()
	}
	return nil, errors.ErrUnsupported
}

// markAuthenticated marks the request's connection authenticated.
func markAuthenticated(r *http.Request) {
	if c, ok := r.Context().Value(connKey{}).(*limitedConn); ok {
		c.authenticated()
	}
}

// bodyReader enforces the minimum body rate: the first n bytes of a body
// must have arrived by start + grace + n/rate. It moves the connection's
// read deadline before each Read (a Read that finds too little data by
// then fails with os.ErrDeadlineExceeded).
type bodyReader struct {
	io.ReadCloser
	rc    *http.ResponseController
	start time.Time
	grace time.Duration
	rate  int64
	n     int64
}

func (b *bodyReader) Read(p []byte) (int, error) {
	// Credit at most 64 KiB ahead, so a large p does not buy a slow
	// client minutes.
	ahead := min(int64(len(p)), 64<<10)
	allowed := b.grace + time.Duration(float64(b.n+ahead)/float64(b.rate)*float64(time.Second))
	if err := b.rc.SetReadDeadline(b.start.Add(allowed)); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return 0, err
	}
	n, err := b.ReadCloser.Read(p)
	b.n += int64(n)
	return n, err
}
