package wsconn_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/energyscope/energyscope/internal/wsconn"
	"github.com/gorilla/websocket"
)

// pair serves one websocket on loopback; the server side is handed to
// serve (which owns it until it returns) and the client side is returned.
func pair(t *testing.T, serve func(ws *websocket.Conn)) *websocket.Conn {
	t.Helper()
	up := websocket.Upgrader{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		serve(ws)
	}))
	t.Cleanup(srv.Close)
	cl, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(srv.URL, "http"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

// TestOrderAndCloseReason: messages arrive in the order sent, then the
// close frame with the code and text given to Shutdown; Shutdown returns
// only after the writer has written what was queued.
func TestOrderAndCloseReason(t *testing.T) {
	const n = 200
	shut := make(chan struct{})
	cl := pair(t, func(ws *websocket.Conn) {
		c := wsconn.New(ws, wsconn.Options{Queue: n})
		for i := range n {
			if err := c.Send(websocket.TextMessage, fmt.Appendf(nil, "%d", i)); err != nil {
				t.Errorf("send %d: %v", i, err)
			}
		}
		c.Shutdown(wsconn.Reason{Code: websocket.CloseGoingAway, Text: "bye"})
		if err := c.Send(websocket.TextMessage, []byte("late")); !errors.Is(err, wsconn.ErrClosed) {
			t.Errorf("send after shutdown: %v, want ErrClosed", err)
		}
		close(shut)
	})
	cl.SetReadDeadline(time.Now().Add(30 * time.Second))
	for i := range n {
		_, b, err := cl.ReadMessage()
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if string(b) != fmt.Sprint(i) {
			t.Fatalf("message %d is %q", i, b)
		}
	}
	_, _, err := cl.ReadMessage()
	var ce *websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != websocket.CloseGoingAway || ce.Text != "bye" {
		t.Fatalf("after the messages: %v, want close 1001 bye", err)
	}
	<-shut
}

// TestPingKeepsIdleAlive: a connection on which nothing is sent for
// several read timeouts stays open because pings draw pongs that push the
// server's read deadline forward; without pings the same connection dies.
func TestPingKeepsIdleAlive(t *testing.T) {
	for _, tc := range []struct {
		ping  time.Duration
		alive bool
	}{{50 * time.Millisecond, true}, {-1, false}} {
		readErr := make(chan error, 1)
		cl := pair(t, func(ws *websocket.Conn) {
			c := wsconn.New(ws, wsconn.Options{PingInterval: tc.ping, ReadTimeout: time.Second})
			_, _, err := ws.ReadMessage() // the peer never sends
			readErr <- err
			c.Shutdown(wsconn.Reason{})
		})
		// The client must read for its pong handler to run.
		go func() {
			for {
				if _, _, err := cl.ReadMessage(); err != nil {
					return
				}
			}
		}()
		select {
		case err := <-readErr:
			if tc.alive {
				t.Fatalf("ping %v: idle connection died: %v", tc.ping, err)
			}
		case <-time.After(4 * time.Second):
			if !tc.alive {
				t.Fatalf("ping %v: connection without pings outlived its read timeout", tc.ping)
			}
		}
		cl.Close()
	}
}

// TestSlowConsumerIsTyped: a peer that stops reading fills its socket and
// then the queue; Send then says so with a *SlowConsumerError instead of
// buffering, and closing with that reason ends the writer within the
// close deadline even though the peer never reads.
func TestSlowConsumerIsTyped(t *testing.T) {
	got := make(chan error, 1)
	pair(t, func(ws *websocket.Conn) {
		c := wsconn.New(ws, wsconn.Options{Queue: 4, WriteTimeout: 30 * time.Second, CloseTimeout: 200 * time.Millisecond})
		msg := make([]byte, 64<<10)
		deadline := time.Now().Add(20 * time.Second)
		for time.Now().Before(deadline) {
			err := c.Send(websocket.BinaryMessage, msg)
			var slow *wsconn.SlowConsumerError
			if errors.As(err, &slow) {
				c.Close(wsconn.Reason{Code: websocket.CloseTryAgainLater, Text: err.Error(), Err: err})
				select {
				case <-c.Done():
				case <-time.After(10 * time.Second):
					t.Error("the writer did not end after the cut")
				}
				r, ok := c.Reason()
				if !ok || !errors.As(r.Err, &slow) || slow.Queued != 4 {
					t.Errorf("reason %+v, want a slow consumer with 4 queued", r)
				}
				got <- err
				return
			}
			if err != nil {
				got <- err
				return
			}
		}
		got <- errors.New("the queue never filled")
	})
	select {
	case err := <-got:
		var slow *wsconn.SlowConsumerError
		if !errors.As(err, &slow) {
			t.Fatal(err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("no answer")
	}
}

// TestWriteErrorEndsWriter: when the peer is gone the writer ends on its
// own, with the write error as the reason, and Send reports ErrClosed.
func TestWriteErrorEndsWriter(t *testing.T) {
	ready := make(chan *wsconn.Conn, 1)
	cl := pair(t, func(ws *websocket.Conn) {
		c := wsconn.New(ws, wsconn.Options{PingInterval: 20 * time.Millisecond})
		ready <- c
		<-c.Done()
	})
	c := <-ready
	cl.UnderlyingConn().Close()
	select {
	case <-c.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("the writer did not notice the peer was gone")
	}
	if r, ok := c.Reason(); !ok || r.Err == nil {
		t.Fatalf("reason %+v %v, want the write error", r, ok)
	}
	if err := c.Send(websocket.TextMessage, nil); !errors.Is(err, wsconn.ErrClosed) {
		t.Fatalf("send: %v", err)
	}
}

// TestSendWaitHoldsBack: SendWait blocks a producer while the bulk lane is
// full instead of failing, keeps its order, calls sent for every message
// written, and returns ErrClosed when stop closes.
func TestSendWaitHoldsBack(t *testing.T) {
	const n = 50
	var sent atomic.Int64
	done := make(chan struct{})
	cl := pair(t, func(ws *websocket.Conn) {
		defer close(done)
		c := wsconn.New(ws, wsconn.Options{BulkQueue: 1})
		for i := range n {
			if err := c.SendWait(websocket.TextMessage, fmt.Appendf(nil, "%d", i), func() { sent.Add(1) }, nil); err != nil {
				t.Errorf("send %d: %v", i, err)
			}
		}
		// The peer reads n and stops: the lane fills, and stop frees the producer.
		stop := make(chan struct{})
		errc := make(chan error, 1)
		go func() {
			for {
				if err := c.SendWait(websocket.TextMessage, make([]byte, 64<<10), nil, stop); err != nil {
					errc <- err
					return
				}
			}
		}()
		time.Sleep(100 * time.Millisecond)
		close(stop)
		if err := <-errc; !errors.Is(err, wsconn.ErrClosed) {
			t.Errorf("after stop: %v", err)
		}
		c.Close(wsconn.Reason{})
		c.Wait()
	})
	cl.SetReadDeadline(time.Now().Add(30 * time.Second))
	for i := range n {
		_, b, err := cl.ReadMessage()
		if err != nil || string(b) != fmt.Sprint(i) {
			t.Fatalf("message %d: %q %v", i, b, err)
		}
	}
	<-done
	if sent.Load() != n {
		t.Fatalf("sent called %d times, want %d", sent.Load(), n)
	}
}
