package client_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/energyscope/energyscope/internal/wiring"
	"github.com/energyscope/energyscope/localcache"
	"github.com/energyscope/energyscope/sync/client"
)

// swallowHelloProxy relays TCP to target; on the first connection it
// passes the client's upgrade request but drops everything after it (the
// hello), so the server waits for a hello and the client for a welcome.
func swallowHelloProxy(t *testing.T, target string) (addr string, conns *atomic.Int32) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	conns = new(atomic.Int32)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n := conns.Add(1)
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			go func() { io.Copy(c, s); c.Close() }()
			go func() {
				defer s.Close()
				if n > 1 {
					io.Copy(s, c)
					return
				}
				var req []byte
				buf := make([]byte, 4096)
				for !bytes.Contains(req, []byte("\r\n\r\n")) {
					k, err := c.Read(buf)
					if err != nil {
						return
					}
					req = append(req, buf[:k]...)
				}
				end := bytes.Index(req, []byte("\r\n\r\n")) + 4
				s.Write(req[:end])
				io.Copy(io.Discard, c) // the hello and the rest: lost
			}()
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return ln.Addr().String(), conns
}

// TestNoWelcomeReconnects: a connection whose hello is lost in transit
// (both sides wait) is dropped after WelcomeTimeout and made again, and
// the companion then syncs. Before, it waited for ever.
func TestNoWelcomeReconnects(t *testing.T) {
	_, hs := newServer(t)
	addr, conns := swallowHelloProxy(t, strings.TrimPrefix(hs.URL, "http://"))
	st, err := localcache.Open(t.TempDir(), &localcache.Options{CompactRows: -1, CompactBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	log := &logBuf{}
	log.dumpOnFailure(t, "companion")
	eng := client.New(wiring.Sink{Store: st}, client.Options{Server: "http://" + addr, Name: t.Name(), Logger: log.logger(),
		WelcomeTimeout: 200 * time.Millisecond, MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { eng.Run(ctx); close(done) }()
	defer func() { cancel(); <-done; st.Close() }()

	eventually(t, "the stocks dataset synced", func() bool {
		_, id, _, err := st.State("stocks")
		return err == nil && id != ""
	})
	if n := eng.Metrics().WelcomeTimeouts; n != 1 {
		t.Errorf("%d 'no welcome' warnings, want 1", n)
	}
	if n := conns.Load(); n < 2 {
		t.Errorf("%d connections, want a second one after the lost hello", n)
	}
}
