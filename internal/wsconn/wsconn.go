// Package wsconn is the one writer of a gorilla/websocket connection:
// a bounded outbound queue drained by a single goroutine (gorilla allows
// one concurrent writer), a write deadline on every message, a ping every
// interval with the read deadline pushed forward by each pong, a close
// frame carrying a reason, and a Close that waits for the writer to end.
//
// A consumer that does not keep up is never buffered without bound: Send
// does not block and reports a *SlowConsumerError when the queue is full,
// and the caller cuts the connection with the reason of its choice (the
// code and text are part of each caller's wire contract). SendWait is the
// blocking lane, for producers that should be held back instead (a file
// transfer, a client's own requests); the writer takes Send's messages
// first, so a bulk transfer never delays live ones.
//
// What it is not: it does not read. The caller keeps its read loop and
// calls Touch after each message it reads; the connection's handshake,
// read limits and message formats stay with the caller.
//
// It sits under internal/ as a leaf that imports only the standard
// library and gorilla/websocket, so that server/hub, sync/client and
// functions/bridge (which may import only functions, the standard library
// and its own dependencies) can all use it without an upward or sideways
// import in ARCHITECTURE.md's graph.
package wsconn

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gorilla/websocket"
)

// ErrClosed is returned by Send and SendWait once the connection is
// closing.
var ErrClosed = errors.New("wsconn: connection closed")

// SlowConsumerError is Send's answer when the outbound queue is full:
// the peer is not reading as fast as it is sent to.
type SlowConsumerError struct {
	Queued int // messages in the queue when it was found full
}

func (e *SlowConsumerError) Error() string {
	return fmt.Sprintf("slow consumer: %d messages queued", e.Queued)
}

// Reason says why a connection ended. Code and Text go into the close
// frame (Text truncated to what a control frame can hold); Err, if set,
// is the cause (a *SlowConsumerError, a write error).
type Reason struct {
	Code int
	Text string
	Err  error
}

// Options for New. The zero value of a field means its default.
type Options struct {
	// Queue bounds Send's queue; default 64.
	Queue int
	// BulkQueue bounds SendWait's queue; default 2.
	BulkQueue int
	// WriteTimeout is the deadline of each message and ping; default 15 s.
	WriteTimeout time.Duration
	// PingInterval between pings; default 25 s; negative: no pings.
	PingInterval time.Duration
	// ReadTimeout, if positive, is the read deadline that New sets and
	// that every pong and every Touch pushes forward: a peer that answers
	// neither messages nor pings for this long is gone.
	ReadTimeout time.Duration
	// CloseTimeout bounds the close: the queued messages still unwritten
	// and the close frame share this deadline; default 1 s.
	CloseTimeout time.Duration
	// Written, if set, is called by the writer after each message with
	// its length and the write's error.
	Written func(n int, err error)
	// ServerFrames says this end is the server, whose frames are not
	// masked (RFC 6455 5.1). The writer then frames every message itself
	// and writes straight to the socket: the messages queued on Send's
	// lane when it wakes go out in one write (up to maxBatch bytes; a
	// burst to one peer costs one syscall, not one each), the same bytes
	// may be queued to many connections (a fan-out encodes once), and the
	// socket's write deadline is refreshed at most every
	// WriteTimeout/8 (1 s at most) instead of before every message, so a
	// write that does not finish is cut after between 7/8 of WriteTimeout
	// and WriteTimeout. The peer's pings are answered through Send's lane,
	// so that the writer is the only goroutine that writes. Messages must
	// not be fragmented or compressed on this connection (the hub never
	// negotiates compression).
	ServerFrames bool
}

func (o *Options) ensureDefaults() {
	if o.Queue <= 0 {
		o.Queue = 64
	}
	if o.BulkQueue <= 0 {
		o.BulkQueue = 2
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = 15 * time.Second
	}
	if o.PingInterval == 0 {
		o.PingInterval = 25 * time.Second
	}
	if o.CloseTimeout <= 0 {
		o.CloseTimeout = time.Second
	}
}

type frame struct {
	kind int
	data []byte
	sent func() // if set, called once the frame was written or dropped
	// framed: data is a whole frame (Frame's); payload is its message's
	// length (Written). A marker has no data: it wakes the writer to
	// write carry.
	framed  bool
	marker  bool
	payload int
}

// Conn owns the writing side of ws. Its methods are safe for concurrent
// use.
type Conn struct {
	ws   *websocket.Conn
	opts Options
	q    chan frame    // Send's lane, written first
	bulk chan frame    // SendWait's lane
	quit chan struct{} // closed by the first Close
	done chan struct{} // closed when the writer has ended and ws is closed
	once sync.Once
	why  atomic.Pointer[Reason] // set once, before quit closes
	// closeBy (unix ns) is the deadline of everything written once Close
	// was called; set before quit closes.
	closeBy atomic.Int64

	// The writer's own state with ServerFrames (guarded by wmu):
	// dl is the socket's write deadline as it last set it (zero: unknown,
	// set it before the next write), slack how stale dl may get, batch
	// the frames being written, out, hdrs and bufs their bytes.
	dl    time.Time
	slack time.Duration
	batch []frame
	out   []byte
	hdrs  []byte
	bufs  net.Buffers
	// writes counts the socket writes of messages (ServerFrames).
	writes atomic.Int64

	// Direct writes (SendFramed): wmu is held by whoever writes to the
	// socket, the writer or SendFramed; pending counts the messages
	// queued and not yet written (incremented before a message enters a
	// queue, decremented by the writer under wmu once it is written), so
	// that SendFramed, holding wmu and seeing pending 0, knows nothing
	// sent before it is still to be written. raw is the socket's
	// syscall.RawConn, nil where a direct write is not possible (not
	// ServerFrames, not a plain TCP socket, or not unix).
	wmu     sync.Mutex
	pending atomic.Int64
	raw     syscall.RawConn
	// carry is the rest of a frame a direct write began (the socket took
	// only part of it), carryPayload its message's length; every write
	// under wmu writes it first. closed: the close frame is written, and
	// nothing may follow it. Both guarded by wmu.
	carry        []byte
	carryPayload int
	closed       bool
}

// Writes is the number of socket writes the writer made for messages
// with ServerFrames (several messages queued at once share one); 0
// without it.
func (c *Conn) Writes() int64 { return c.writes.Load() }

// New starts the writer of ws. ws must not be written to by anyone else
// from now on, except through the returned Conn.
func New(ws *websocket.Conn, o Options) *Conn {
	o.ensureDefaults()
	c := &Conn{ws: ws, opts: o, q: make(chan frame, o.Queue), bulk: make(chan frame, o.BulkQueue), quit: make(chan struct{}), done: make(chan struct{})}
	if o.ReadTimeout > 0 {
		c.Touch()
		ws.SetPongHandler(func(string) error { c.Touch(); return nil })
	}
	if o.ServerFrames {
		c.raw = rawConn(ws.UnderlyingConn())
		c.slack = min(o.WriteTimeout/8, time.Second)
		// Gorilla's default answers a ping from the reading goroutine with
		// a write of its own, which would also move the write deadline.
		ws.SetPingHandler(func(data string) error {
			c.Send(websocket.PongMessage, []byte(data)) // a full queue: the next Send cuts the peer
			return nil
		})
	}
	go c.run()
	return c
}

// Touch pushes the read deadline forward (after a message was read).
// It does nothing without Options.ReadTimeout.
func (c *Conn) Touch() {
	if c.opts.ReadTimeout > 0 {
		c.ws.SetReadDeadline(time.Now().Add(c.opts.ReadTimeout))
	}
}

// Send queues a message without blocking. A full queue returns a
// *SlowConsumerError (the message is dropped; the caller decides how to
// close); a closing connection returns ErrClosed.
func (c *Conn) Send(kind int, data []byte) error {
	select {
	case <-c.quit:
		return ErrClosed
	default:
	}
	return c.queue(frame{kind: kind, data: data, payload: len(data)})
}

// queue puts f on Send's lane without blocking.
func (c *Conn) queue(f frame) error {
	c.pending.Add(1)
	select {
	case c.q <- f:
		return nil
	default:
		c.pending.Add(-1)
		return &SlowConsumerError{Queued: len(c.q)}
	}
}

// SendWait queues a message on the bulk lane, waiting for room until
// stop closes (stop may be nil) or the connection closes. sent, if not
// nil, is called once the message was written or dropped by the writer
// (to recycle its buffer); not when SendWait returns an error.
func (c *Conn) SendWait(kind int, data []byte, sent func(), stop <-chan struct{}) error {
	select {
	case <-c.quit:
		return ErrClosed
	default:
	}
	c.pending.Add(1)
	select {
	case c.bulk <- frame{kind: kind, data: data, sent: sent, payload: len(data)}:
		return nil
	case <-c.quit:
	case <-stop:
	}
	c.pending.Add(-1)
	return ErrClosed
}

// Close ends the connection once with reason r: the writer writes what
// is already queued and the close frame within Options.CloseTimeout,
// then closes the socket. A write in flight to a peer that does not read
// is cut at the same deadline, so a shutdown is not held up for a whole
// WriteTimeout. Later calls do nothing. Close does not wait; see Wait
// and Shutdown.
func (c *Conn) Close(r Reason) {
	c.once.Do(func() {
		by := time.Now().Add(c.opts.CloseTimeout)
		c.closeBy.Store(by.UnixNano())
		c.why.Store(&r)
		close(c.quit)
		// net.Conn's deadlines may be set from any goroutine (gorilla's
		// may not): this bounds the writer's current write.
		c.ws.UnderlyingConn().SetWriteDeadline(by)
	})
}

// Shutdown is Close followed by Wait.
func (c *Conn) Shutdown(r Reason) {
	c.Close(r)
	<-c.done
}

// Wait returns once the writer has ended and the socket is closed.
func (c *Conn) Wait() { <-c.done }

// Done is closed once the writer has ended and the socket is closed.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Closing is closed once the connection started closing.
func (c *Conn) Closing() <-chan struct{} { return c.quit }

// Reason is why the connection ended (the first Close, or the write
// error that ended it); ok is false while it is open.
func (c *Conn) Reason() (r Reason, ok bool) {
	if p := c.why.Load(); p != nil {
		return *p, true
	}
	return Reason{}, false
}

func (c *Conn) write(f frame, deadline time.Time) error {
	if c.opts.ServerFrames {
		c.batch = append(c.batch[:0], f)
		return c.writeFramed(deadline)
	}
	if by := c.closeBy.Load(); by != 0 && deadline.UnixNano() > by {
		deadline = time.Unix(0, by)
	}
	c.ws.SetWriteDeadline(deadline)
	err := c.ws.WriteMessage(f.kind, f.data)
	if f.sent != nil {
		f.sent()
	}
	if c.opts.Written != nil {
		c.opts.Written(len(f.data), err)
	}
	return err
}

func (c *Conn) run() {
	defer close(c.done)
	defer c.ws.Close()
	var tick <-chan time.Time
	if c.opts.PingInterval > 0 {
		t := time.NewTicker(c.opts.PingInterval)
		defer t.Stop()
		tick = t.C
	}
	write := func(f frame) bool {
		var err error
		c.wmu.Lock()
		if c.opts.ServerFrames {
			c.batch = append(c.batch[:0], f)
			c.collect()
			n := len(c.batch)
			err = c.writeFramed(time.Time{})
			c.pending.Add(-int64(n))
		} else {
			err = c.write(f, time.Now().Add(c.opts.WriteTimeout))
			c.pending.Add(-1)
		}
		c.wmu.Unlock()
		if err != nil {
			c.Close(Reason{Code: websocket.CloseAbnormalClosure, Text: "write: " + err.Error(), Err: err})
			c.drop()
			return false
		}
		return true
	}
	ping := func() error {
		c.wmu.Lock()
		defer c.wmu.Unlock()
		if c.opts.ServerFrames {
			c.batch = append(c.batch[:0], frame{kind: websocket.PingMessage})
			return c.writeFramed(time.Time{})
		}
		return c.ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(c.opts.WriteTimeout))
	}
	for {
		// Send's lane first: a bulk transfer must not delay live messages.
		select {
		case f := <-c.q:
			if !write(f) {
				return
			}
			continue
		default:
		}
		select {
		case f := <-c.q:
			if !write(f) {
				return
			}
		case f := <-c.bulk:
			if !write(f) {
				return
			}
		case <-tick:
			if err := ping(); err != nil {
				c.Close(Reason{Code: websocket.CloseAbnormalClosure, Text: "ping: " + err.Error(), Err: err})
				c.drop()
				return
			}
		case <-c.quit:
			c.closing()
			c.drop()
			return
		}
	}
}

// closing writes what is queued on Send's lane, then the close frame,
// under one deadline. The bulk lane is dropped: its producers are told
// ErrClosed.
func (c *Conn) closing() {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	deadline := time.Unix(0, c.closeBy.Load())
	for {
		select {
		case f := <-c.q:
			err := c.write(f, deadline)
			c.pending.Add(-1)
			if err != nil {
				c.drop()
				return
			}
			continue
		default:
		}
		break
	}
	c.closed = true
	if c.carry != nil {
		// The rest of a direct write goes before the close frame.
		c.batch = c.batch[:0]
		if err := c.writeFramed(deadline); err != nil {
			return
		}
	}
	r, _ := c.Reason()
	code := r.Code
	if code == 0 || code == websocket.CloseAbnormalClosure || code == websocket.CloseNoStatusReceived {
		code = websocket.CloseNormalClosure
	}
	c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, truncate(r.Text, 120)), deadline)
}

// maxBatch bounds the bytes of one batched write (ServerFrames): what is
// queued beyond it waits for the next write.
const maxBatch = 256 << 10

// collect adds to the batch the messages waiting on Send's lane, in
// order, up to maxBatch bytes (ServerFrames).
func (c *Conn) collect() {
	n := len(c.batch[0].data)
	for n < maxBatch {
		select {
		case f := <-c.q:
			c.batch = append(c.batch, f)
			n += len(f.data)
			continue
		default:
		}
		return
	}
}

// writeFramed writes carry (the rest of a direct write), then the
// batch's messages as unmasked frames, in one write (ServerFrames), under deadline if it is set (the close), else under the
// connection's rarely refreshed write deadline; then it calls each
// message's sent and Written. Up to copyBelow bytes of payload are copied
// behind their headers into one buffer (one write on a TLS connection
// too); a bigger batch (a snapshot chunk) goes out as a vectored write.
func (c *Conn) writeFramed(deadline time.Time) error {
	size := len(c.carry)
	for _, f := range c.batch {
		size += len(f.data)
	}
	if deadline.IsZero() {
		c.refreshDeadline()
	} else {
		c.ws.UnderlyingConn().SetWriteDeadline(deadline)
		c.dl = deadline
	}
	var err error
	if size <= copyBelow {
		b := append(c.out[:0], c.carry...)
		for _, f := range c.batch {
			if !f.framed {
				b = appendHeader(b, f.kind, len(f.data))
			}
			b = append(b, f.data...)
		}
		_, err = c.ws.UnderlyingConn().Write(b)
		if cap(b) <= keepOut {
			c.out = b
		} else {
			c.out = nil // memory per connection stays small; bursts allocate
		}
	} else {
		c.hdrs = c.hdrs[:0]
		for _, f := range c.batch {
			if !f.framed {
				c.hdrs = appendHeader(c.hdrs, f.kind, len(f.data))
			}
		}
		c.bufs = c.bufs[:0]
		if len(c.carry) > 0 {
			c.bufs = append(c.bufs, c.carry)
		}
		off := 0
		for _, f := range c.batch {
			if !f.framed {
				n := headerLen(len(f.data))
				c.bufs = append(c.bufs, c.hdrs[off:off+n:off+n])
				off += n
			}
			if len(f.data) > 0 {
				c.bufs = append(c.bufs, f.data)
			}
		}
		bufs := c.bufs // WriteTo consumes its receiver
		_, err = bufs.WriteTo(c.ws.UnderlyingConn())
		clear(c.bufs[:cap(c.bufs)])
	}
	if c.carry != nil {
		if c.opts.Written != nil {
			c.opts.Written(c.carryPayload, err)
		}
		c.carry, c.carryPayload = nil, 0
	}
	for i, f := range c.batch {
		if f.sent != nil {
			f.sent()
		}
		if c.opts.Written != nil && !f.marker && f.kind != websocket.PingMessage && f.kind != websocket.PongMessage {
			c.opts.Written(f.payload, err)
		}
		c.batch[i] = frame{}
	}
	c.writes.Add(1)
	return err
}

// copyBelow is the payload of a batch up to which writeFramed copies it
// into one buffer.
const copyBelow = 64 << 10

// keepOut is the largest write buffer a connection keeps between writes.
const keepOut = 4 << 10

// refreshDeadline moves the socket's write deadline to WriteTimeout from
// now when it is closer than WriteTimeout - slack, within the close
// deadline once Close was called. Close sets the socket's deadline from
// another goroutine after storing closeBy, so closeBy is read again after
// the deadline is set: the earlier of the two always wins.
func (c *Conn) refreshDeadline() {
	now := time.Now()
	if c.dl.Sub(now) >= c.opts.WriteTimeout-c.slack {
		return
	}
	dl := now.Add(c.opts.WriteTimeout)
	if by := c.closeBy.Load(); by != 0 && dl.UnixNano() > by {
		dl = time.Unix(0, by)
	}
	c.ws.UnderlyingConn().SetWriteDeadline(dl)
	if by := c.closeBy.Load(); by != 0 && dl.UnixNano() > by {
		dl = time.Unix(0, by)
		c.ws.UnderlyingConn().SetWriteDeadline(dl)
	}
	c.dl = dl
}

// headerLen is the length of an unmasked frame header for n payload bytes.
func headerLen(n int) int {
	switch {
	case n < 126:
		return 2
	case n <= 0xffff:
		return 4
	}
	return 10
}

// appendHeader appends the header of one unmasked, final, uncompressed
// frame of kind (gorilla's message types are RFC 6455's opcodes) with n
// payload bytes.
func appendHeader(b []byte, kind, n int) []byte {
	b = append(b, 0x80|byte(kind))
	switch {
	case n < 126:
		return append(b, byte(n))
	case n <= 0xffff:
		return append(b, 126, byte(n>>8), byte(n))
	}
	return binary.BigEndian.AppendUint64(append(b, 127), uint64(n))
}

// drop releases what is still queued, unwritten.
func (c *Conn) drop() {
	for {
		select {
		case f := <-c.q:
			c.pending.Add(-1)
			if f.sent != nil {
				f.sent()
			}
		case f := <-c.bulk:
			c.pending.Add(-1)
			if f.sent != nil {
				f.sent()
			}
		default:
			return
		}
	}
}

// truncate keeps a close reason within a control frame (125 bytes, 2 of
// them the code).
func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
