// Package wsload opens many sync subscribers at once, for benchmarks that
// measure the hub's fan-out with live companions (the sync bench and the
// cluster benchmarks of the server). It imports only the sync protocol
// and the websocket library.
package wsload

import (
	"fmt"
	"strings"
	"time"

	"github.com/gorilla/websocket"

	"github.com/energyscope/energyscope/sync/protocol"
)

// DialSubscribers opens n websocket subscribers of base's /v1/sync (32
// dials at a time), each saying hello with sub and waiting for its
// catch-up to end, then reading and discarding everything in the
// background. sub should be the server's head (epoch, snapshot, seq):
// a hello without a snapshot is offered one and keeps no subscription.
// It returns the connections (nil where a dial failed) and the first
// error.
func DialSubscribers(base string, n int, sub protocol.Sub) ([]*websocket.Conn, error) {
	u := "ws" + strings.TrimPrefix(base, "http") + "/v1/sync"
	conns := make([]*websocket.Conn, n)
	errs := make(chan error, n)
	sem := make(chan struct{}, 32)
	for i := range conns {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			d := websocket.Dialer{HandshakeTimeout: time.Minute, ReadBufferSize: 1024, WriteBufferSize: 1024}
			ws, _, err := d.Dial(u, nil)
			if err != nil {
				errs <- err
				return
			}
			conns[i] = ws
			hello := &protocol.Message{Type: protocol.THello, Proto: []int{protocol.VersionMin, protocol.VersionMax}, Client: fmt.Sprintf("sub%d", i), Subs: []protocol.Sub{sub}}
			if err := ws.WriteMessage(websocket.TextMessage, hello.Encode()); err != nil {
				errs <- err
				return
			}
			for {
				_, b, err := ws.ReadMessage()
				if err != nil {
					errs <- err
					return
				}
				if m, err := protocol.DecodeMessage(b); err == nil && m.Type == protocol.TCatchupEnd {
					break
				}
			}
			errs <- nil
			go func() {
				for {
					if _, _, err := ws.NextReader(); err != nil {
						return
					}
				}
			}()
		}()
	}
	var first error
	for range n {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return conns, first
}
