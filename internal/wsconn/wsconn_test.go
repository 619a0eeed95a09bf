package wsconn_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
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

// bothModes runs test with the writer in each of its modes: gorilla's
// framing, and its own (Options.ServerFrames, the server's).
func bothModes(t *testing.T, test func(t *testing.T, framed bool)) {
	for _, framed := range []bool{false, true} {
		t.Run(fmt.Sprintf("ServerFrames=%v", framed), func(t *testing.T) { test(t, framed) })
	}
}

// TestOrderAndCloseReason: messages arrive in the order sent, then the
// close frame with the code and text given to Shutdown; Shutdown returns
// only after the writer has written what was queued.
func TestOrderAndCloseReason(t *testing.T) {
	bothModes(t, func(t *testing.T, framed bool) {
		const n = 200
		shut := make(chan struct{})
		cl := pair(t, func(ws *websocket.Conn) {
			c := wsconn.New(ws, wsconn.Options{ServerFrames: framed, Queue: n})
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
	})
}

// TestPingKeepsIdleAlive: a connection on which nothing is sent for
// several read timeouts stays open because pings draw pongs that push the
// server's read deadline forward; without pings the same connection dies.
func TestPingKeepsIdleAlive(t *testing.T) {
	bothModes(t, func(t *testing.T, framed bool) {
		for _, tc := range []struct {
			ping  time.Duration
			alive bool
		}{{50 * time.Millisecond, true}, {-1, false}} {
			readErr := make(chan error, 1)
			cl := pair(t, func(ws *websocket.Conn) {
				c := wsconn.New(ws, wsconn.Options{ServerFrames: framed, PingInterval: tc.ping, ReadTimeout: time.Second})
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
	})
}

// TestSlowConsumerIsTyped: a peer that stops reading fills its socket and
// then the queue; Send then says so with a *SlowConsumerError instead of
// buffering, and closing with that reason ends the writer within the
// close deadline even though the peer never reads.
func TestSlowConsumerIsTyped(t *testing.T) {
	bothModes(t, func(t *testing.T, framed bool) {
		got := make(chan error, 1)
		pair(t, func(ws *websocket.Conn) {
			c := wsconn.New(ws, wsconn.Options{ServerFrames: framed, Queue: 4, WriteTimeout: 30 * time.Second, CloseTimeout: 200 * time.Millisecond})
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
	})
}

// TestWriteErrorEndsWriter: when the peer is gone the writer ends on its
// own, with the write error as the reason, and Send reports ErrClosed.
func TestWriteErrorEndsWriter(t *testing.T) {
	bothModes(t, func(t *testing.T, framed bool) {
		ready := make(chan *wsconn.Conn, 1)
		cl := pair(t, func(ws *websocket.Conn) {
			c := wsconn.New(ws, wsconn.Options{ServerFrames: framed, PingInterval: 20 * time.Millisecond})
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
	})
}

// TestSendWaitHoldsBack: SendWait blocks a producer while the bulk lane is
// full instead of failing, keeps its order, calls sent for every message
// written, and returns ErrClosed when stop closes.
func TestSendWaitHoldsBack(t *testing.T) {
	bothModes(t, func(t *testing.T, framed bool) {
		const n = 50
		var sent atomic.Int64
		done := make(chan struct{})
		cl := pair(t, func(ws *websocket.Conn) {
			defer close(done)
			c := wsconn.New(ws, wsconn.Options{ServerFrames: framed, BulkQueue: 1})
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
	})
}

// TestServerFramesBatchInOrder: with ServerFrames, messages queued while
// a write is blocked (the peer is not reading) go out together in few
// writes once the peer reads, each still its own message: in order,
// none lost or repeated, every frame-length boundary of RFC 6455 framed
// right (gorilla's reader checks the frames).
func TestServerFramesBatchInOrder(t *testing.T) {
	sizes := []int{0, 1, 125, 126, 127, 300, 65535, 65536, 70000}
	const n = 600
	msg := func(i int) []byte {
		b := make([]byte, sizes[i%len(sizes)])
		for j := range b {
			b[j] = byte(i + j)
		}
		return b
	}
	queued := make(chan *wsconn.Conn, 1)
	cl := pair(t, func(ws *websocket.Conn) {
		c := wsconn.New(ws, wsconn.Options{ServerFrames: true, Queue: n + 1, PingInterval: -1})
		// 32 MiB fill the socket: the writer blocks on it while the
		// rest queue up behind.
		if err := c.Send(websocket.BinaryMessage, make([]byte, 32<<20)); err != nil {
			t.Error(err)
		}
		time.Sleep(200 * time.Millisecond)
		for i := range n {
			if err := c.Send(websocket.BinaryMessage, msg(i)); err != nil {
				t.Errorf("send %d: %v", i, err)
			}
		}
		queued <- c
		<-c.Done()
	})
	c := <-queued
	cl.SetReadLimit(64 << 20)
	cl.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, b, err := cl.ReadMessage(); err != nil || len(b) != 32<<20 {
		t.Fatalf("first message: %d bytes, %v", len(b), err)
	}
	for i := range n {
		kind, b, err := cl.ReadMessage()
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if kind != websocket.BinaryMessage || !bytes.Equal(b, msg(i)) {
			t.Fatalf("message %d: kind %d, %d bytes, want %d bytes", i, kind, len(b), len(msg(i)))
		}
	}
	// 600 messages, a third of them 64 KiB or more: a batch holds up to
	// 256 KiB, so at least ~70 writes; one a message would be 601.
	if w := c.Writes(); w > 200 {
		t.Fatalf("%d writes for %d messages: not batched", w, n+1)
	}
	t.Logf("%d messages in %d writes", n+1, c.Writes())
	c.Shutdown(wsconn.Reason{})
}

// TestServerFramesAnswersPings: with ServerFrames the peer's pings are
// answered (through the writer), with their data.
func TestServerFramesAnswersPings(t *testing.T) {
	cl := pair(t, func(ws *websocket.Conn) {
		c := wsconn.New(ws, wsconn.Options{ServerFrames: true, PingInterval: -1})
		for {
			if _, _, err := ws.ReadMessage(); err != nil {
				break
			}
		}
		c.Shutdown(wsconn.Reason{})
	})
	pongs := make(chan string, 3)
	cl.SetPongHandler(func(data string) error { pongs <- data; return nil })
	go func() {
		for {
			if _, _, err := cl.ReadMessage(); err != nil {
				return
			}
		}
	}()
	for i := range 3 {
		want := fmt.Sprintf("ping %d", i)
		if err := cl.WriteControl(websocket.PingMessage, []byte(want), time.Now().Add(5*time.Second)); err != nil {
			t.Fatal(err)
		}
		select {
		case got := <-pongs:
			if got != want {
				t.Fatalf("pong %q, want %q", got, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no pong to ping %d", i)
		}
	}
}

// TestWriteTimeoutCutsStuckPeer: a message the peer never reads ends the
// writer at the write deadline on its own (no Close), with the timeout as
// the reason; with ServerFrames too, whose deadline is refreshed rarely.
func TestWriteTimeoutCutsStuckPeer(t *testing.T) {
	bothModes(t, func(t *testing.T, framed bool) {
		const timeout = 500 * time.Millisecond
		got := make(chan *wsconn.Conn, 1)
		pair(t, func(ws *websocket.Conn) {
			c := wsconn.New(ws, wsconn.Options{ServerFrames: framed, WriteTimeout: timeout, PingInterval: -1})
			// Some small writes first: the deadline is set and then
			// left alone for a while.
			for range 10 {
				c.Send(websocket.TextMessage, []byte("hello"))
			}
			time.Sleep(2 * timeout)
			c.Send(websocket.BinaryMessage, make([]byte, 64<<20))
			got <- c
			<-c.Done()
		})
		c := <-got
		start := time.Now()
		select {
		case <-c.Done():
		case <-time.After(30 * time.Second):
			t.Fatal("the writer is still blocked on a peer that does not read")
		}
		r, _ := c.Reason()
		var ne net.Error // gorilla hides the cause behind a net.Error of its own
		if !errors.As(r.Err, &ne) || !ne.Timeout() {
			t.Fatalf("reason %+v, want a write deadline", r)
		}
		t.Logf("cut after %v (write timeout %v)", time.Since(start).Round(time.Millisecond), timeout)
	})
}

// TestSendFramedKeepsOrder: SendFramed (a direct write while nothing is
// queued) interleaved with Send and QueueFramed (the same lane) from one
// goroutine, in rounds: the peer does not read while a round is sent (the socket fills,
// so a direct write is cut short and its rest queued, and what follows
// queues behind it), then reads the round. Every message arrives once,
// whole, in the order sent.
func TestSendFramedKeepsOrder(t *testing.T) {
	const rounds, perRound = 20, 60
	msg := func(i int) []byte {
		b := make([]byte, []int{10, 200, 300 << 10, 5000}[i%4])
		for j := range b {
			b[j] = byte(i*7 + j)
		}
		return b
	}
	sent := make(chan struct{})
	read := make(chan struct{})
	done := make(chan *wsconn.Conn, 1)
	cl := pair(t, func(ws *websocket.Conn) {
		c := wsconn.New(ws, wsconn.Options{ServerFrames: true, Queue: perRound, PingInterval: -1})
		for r := range rounds {
			for k := range perRound {
				i := r*perRound + k
				var err error
				switch k % 10 {
				case 9: // after direct writes: queued behind them once the socket is full
					err = c.Send(websocket.BinaryMessage, msg(i))
				case 4:
					err = c.QueueFramed(wsconn.Frame(websocket.BinaryMessage, msg(i)))
				default:
					err = c.SendFramed(wsconn.Frame(websocket.BinaryMessage, msg(i)))
				}
				if err != nil {
					t.Errorf("send %d: %v", i, err)
				}
			}
			sent <- struct{}{}
			<-read
		}
		done <- c
		<-c.Done()
	})
	cl.SetReadLimit(1 << 20)
	cl.SetReadDeadline(time.Now().Add(60 * time.Second))
	for r := range rounds {
		<-sent
		for k := range perRound {
			i := r*perRound + k
			kind, b, err := cl.ReadMessage()
			if err != nil {
				t.Fatalf("message %d: %v", i, err)
			}
			if kind != websocket.BinaryMessage || !bytes.Equal(b, msg(i)) {
				t.Fatalf("message %d: %d bytes, want %d: out of order or damaged", i, len(b), len(msg(i)))
			}
		}
		read <- struct{}{}
	}
	c := <-done
	t.Logf("%d messages in %d writes", rounds*perRound, c.Writes())
	c.Shutdown(wsconn.Reason{})
}

// TestSendFramedSlowConsumer: SendFramed to a peer that does not read
// fills the socket, then the queue, and then answers a *SlowConsumerError
// like Send; without ServerFrames it is refused.
func TestSendFramedSlowConsumer(t *testing.T) {
	got := make(chan error, 1)
	pair(t, func(ws *websocket.Conn) {
		c := wsconn.New(ws, wsconn.Options{ServerFrames: true, Queue: 4, CloseTimeout: 200 * time.Millisecond})
		f := wsconn.Frame(websocket.BinaryMessage, make([]byte, 64<<10))
		deadline := time.Now().Add(20 * time.Second)
		for time.Now().Before(deadline) {
			if err := c.SendFramed(f); err != nil {
				c.Close(wsconn.Reason{Code: websocket.CloseTryAgainLater, Text: err.Error(), Err: err})
				got <- err
				return
			}
		}
		got <- errors.New("the queue never filled")
	})
	var slow *wsconn.SlowConsumerError
	if err := <-got; !errors.As(err, &slow) || slow.Queued != 4 {
		t.Fatalf("%v, want a slow consumer with 4 queued", err)
	}
	refused := make(chan error, 1)
	pair(t, func(ws *websocket.Conn) {
		c := wsconn.New(ws, wsconn.Options{})
		refused <- c.SendFramed(wsconn.Frame(websocket.TextMessage, []byte("x")))
		refused <- c.QueueFramed(wsconn.Frame(websocket.TextMessage, []byte("x")))
		c.Shutdown(wsconn.Reason{})
	})
	for range 2 {
		if err := <-refused; !errors.Is(err, wsconn.ErrNotServerFrames) {
			t.Fatalf("SendFramed/QueueFramed without ServerFrames: %v", err)
		}
	}
}

// TestSendFramedWriteError: a direct write to a peer that is gone ends
// the connection with the write error as the reason.
func TestSendFramedWriteError(t *testing.T) {
	ready := make(chan *wsconn.Conn, 1)
	cl := pair(t, func(ws *websocket.Conn) {
		c := wsconn.New(ws, wsconn.Options{ServerFrames: true, PingInterval: -1})
		ready <- c
		<-c.Done()
	})
	c := <-ready
	cl.UnderlyingConn().Close()
	f := wsconn.Frame(websocket.BinaryMessage, make([]byte, 1000))
	deadline := time.After(20 * time.Second)
	for c.SendFramed(f) == nil {
		select {
		case <-deadline:
			t.Fatal("direct writes to a closed peer kept succeeding")
		case <-time.After(time.Millisecond):
		}
	}
	select {
	case <-c.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("the writer did not end")
	}
	if r, ok := c.Reason(); !ok || r.Err == nil {
		t.Fatalf("reason %+v %v, want the write error", r, ok)
	}
}

// TestSendFramedAfterIdle: a direct write after the connection was idle
// for longer than WriteTimeout goes out (the socket's deadline, set by
// an earlier write, is long past by then, and a non-blocking write is
// still checked against it).
func TestSendFramedAfterIdle(t *testing.T) {
	const timeout = 200 * time.Millisecond
	ready := make(chan *wsconn.Conn, 1)
	cl := pair(t, func(ws *websocket.Conn) {
		c := wsconn.New(ws, wsconn.Options{ServerFrames: true, WriteTimeout: timeout, PingInterval: -1})
		ready <- c
		<-c.Done()
	})
	c := <-ready
	defer c.Shutdown(wsconn.Reason{})
	cl.SetReadDeadline(time.Now().Add(30 * time.Second))
	for i := range 3 {
		if i > 0 {
			time.Sleep(3 * timeout)
		}
		m := fmt.Appendf(nil, "m%d", i)
		send := func() error { return c.SendFramed(wsconn.Frame(websocket.TextMessage, m)) }
		if i == 0 {
			// through the writer, which sets the socket's deadline
			send = func() error { return c.Send(websocket.TextMessage, m) }
		}
		if err := send(); err != nil {
			r, _ := c.Reason()
			t.Fatalf("message %d: %v (%+v)", i, err, r)
		}
		if _, b, err := cl.ReadMessage(); err != nil || string(b) != fmt.Sprintf("m%d", i) {
			t.Fatalf("message %d: %q %v", i, b, err)
		}
	}
}

// bigMsg is message i of 64 KiB, numbered in its first bytes.
func bigMsg(i int) []byte {
	b := bytes.Repeat([]byte{byte(i)}, 64<<10)
	binary.BigEndian.PutUint32(b, uint32(i))
	return b
}

// TestConcurrentSendFramedPartial: two goroutines send on one Conn (as
// Publish of two datasets, or a pong, do) through a small socket buffer,
// so that direct writes are cut short while the other sends: every
// message arrives whole (the rest of a cut write went behind the other's
// frame, which then landed inside it). Found by review6 (F1).
func TestConcurrentSendFramedPartial(t *testing.T) {
	const n = 150
	done := make(chan struct{})
	cl := pair(t, func(ws *websocket.Conn) {
		ws.UnderlyingConn().(*net.TCPConn).SetWriteBuffer(16 << 10)
		c := wsconn.New(ws, wsconn.Options{ServerFrames: true, Queue: 1 << 14, PingInterval: -1, WriteTimeout: 60 * time.Second})
		var wg sync.WaitGroup
		wg.Go(func() {
			for i := range n {
				if c.SendFramed(wsconn.Frame(websocket.BinaryMessage, bigMsg(i))) != nil {
					return // the reader says what went wrong
				}
				time.Sleep(time.Millisecond)
			}
		})
		wg.Go(func() {
			for range 10 * n {
				if c.SendFramed(wsconn.Frame(websocket.TextMessage, []byte("small"))) != nil {
					return
				}
				time.Sleep(100 * time.Microsecond)
			}
		})
		wg.Wait()
		<-done
		c.Shutdown(wsconn.Reason{})
	})
	defer close(done)
	cl.SetReadLimit(1 << 20)
	cl.SetReadDeadline(time.Now().Add(60 * time.Second))
	nb, ns := 0, 0
	for nb < n || ns < 10*n {
		kind, b, err := cl.ReadMessage()
		if err != nil {
			t.Fatalf("after %d big, %d small: %v", nb, ns, err)
		}
		switch {
		case kind == websocket.TextMessage && string(b) == "small":
			ns++
		case kind == websocket.BinaryMessage && bytes.Equal(b, bigMsg(nb)):
			nb++
		default:
			t.Fatalf("after %d big, %d small: damaged message kind %d, %d bytes; a whole text frame inside it at %d", nb, ns, kind, len(b), bytes.Index(b, []byte("\x81\x05small")))
		}
	}
}

// TestPingInsidePartialFrame: one sender (SendFramed) through a small
// socket buffer and the writer's own frequent pings: every message
// arrives whole (a ping went out between the two parts of a cut direct
// write). Found by review6 (F2).
func TestPingInsidePartialFrame(t *testing.T) {
	const n = 400
	done := make(chan struct{})
	cl := pair(t, func(ws *websocket.Conn) {
		ws.UnderlyingConn().(*net.TCPConn).SetWriteBuffer(16 << 10)
		c := wsconn.New(ws, wsconn.Options{ServerFrames: true, Queue: 1 << 14, PingInterval: 200 * time.Microsecond, WriteTimeout: 60 * time.Second})
		for i := range n {
			if c.SendFramed(wsconn.Frame(websocket.BinaryMessage, bigMsg(i))) != nil {
				break // the reader says what went wrong
			}
			time.Sleep(500 * time.Microsecond)
		}
		<-done
		c.Shutdown(wsconn.Reason{})
	})
	defer close(done)
	var pings atomic.Int64
	cl.SetPingHandler(func(string) error { pings.Add(1); return nil })
	cl.SetReadLimit(1 << 20)
	cl.SetReadDeadline(time.Now().Add(60 * time.Second))
	for i := range n {
		kind, b, err := cl.ReadMessage()
		if err != nil {
			t.Fatalf("after %d messages, %d pings: %v", i, pings.Load(), err)
		}
		if kind != websocket.BinaryMessage || !bytes.Equal(b, bigMsg(i)) {
			t.Fatalf("after %d messages, %d pings: damaged message kind %d, %d bytes; a ping frame header at %d", i, pings.Load(), kind, len(b), bytes.Index(b, []byte{0x89, 0x00}))
		}
	}
}
