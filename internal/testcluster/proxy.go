// Package testcluster holds what the cluster tests (issue 13: several
// es serve replicas over one lake and one NATS log) share: a loopback TCP
// proxy that cuts a process off from a service and lets it back.
// Imported by tests only.
package testcluster

import (
	"io"
	"net"
	"sync"
)

// Proxy forwards a loopback port to a target address until it is cut.
// Cut closes every connection and refuses new ones (they are accepted
// and closed at once: the client sees a reset, as when a network drops);
// Resume forwards again on the same port.
type Proxy struct {
	target string
	ln     net.Listener

	mu    sync.Mutex // guards cut, conns, closed
	cut   bool
	conns map[net.Conn]bool
	done  chan struct{}
}

// NewProxy listens on 127.0.0.1 on a random port and forwards to target.
func NewProxy(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{target: target, ln: ln, conns: map[net.Conn]bool{}, done: make(chan struct{})}
	go p.accept()
	return p, nil
}

// Addr is the proxy's address (host:port).
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

func (p *Proxy) accept() {
	defer close(p.done)
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.cut {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.conns[c] = true
		p.mu.Unlock()
		go p.pipe(c)
	}
}

func (p *Proxy) pipe(c net.Conn) {
	u, err := net.Dial("tcp", p.target)
	if err != nil {
		p.drop(c)
		return
	}
	p.mu.Lock()
	if p.cut {
		p.mu.Unlock()
		u.Close()
		p.drop(c)
		return
	}
	p.conns[u] = true
	p.mu.Unlock()
	go func() { io.Copy(u, c); u.Close(); c.Close() }()
	io.Copy(c, u)
	c.Close()
	u.Close()
	p.drop(c)
	p.drop(u)
}

func (p *Proxy) drop(c net.Conn) {
	c.Close()
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

// Cut closes every forwarded connection and refuses new ones.
func (p *Proxy) Cut() {
	p.mu.Lock()
	p.cut = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
}

// Resume forwards new connections again.
func (p *Proxy) Resume() {
	p.mu.Lock()
	p.cut = false
	p.mu.Unlock()
}

// Close stops the proxy and closes its connections.
func (p *Proxy) Close() error {
	p.Cut()
	err := p.ln.Close()
	<-p.done
	return err
}
