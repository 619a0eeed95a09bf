package wsconn

import (
	"errors"

	"github.com/gorilla/websocket"
)

// ErrNotServerFrames is SendFramed's answer on a connection without
// Options.ServerFrames.
var ErrNotServerFrames = errors.New("wsconn: SendFramed needs Options.ServerFrames")

// Frame returns data as one unmasked, final frame of kind (a message
// from the server), for SendFramed: a message queued to many connections
// is framed once.
func Frame(kind int, data []byte) []byte {
	return append(appendHeader(make([]byte, 0, headerLen(len(data))+len(data)), kind, len(data)), data...)
}

// SendFramed is Send for a frame made by Frame, on a connection with
// ServerFrames. When nothing sent before is still queued or being
// written, it writes the frame to the socket itself, from the calling
// goroutine, in one non-blocking write: a fan-out to many connections
// that keep up wakes none of their writers. What the socket does not
// take at once (a peer that reads slowly) is queued for the writer ahead
// of anything later, and from then on the frames queue as with Send, with
// Send's errors and slow-consumer policy. A direct write that fails
// closes the connection with the write error as its reason and returns
// ErrClosed. b must not change until the connection is done with it.
//
// The rest of a direct write the socket took only part of is kept in
// carry, and every later write (the writer's batches, its pings, the
// close frame, the next direct write) writes it first: nothing can land
// inside that frame, whatever other goroutines send meanwhile.
//
// Gorilla itself still writes from the reading goroutine, outside wmu,
// in three cases, each ending the connection: its reply to the peer's
// close frame, and the close frames for a message over the read limit
// and for a protocol error. After a direct write that was cut short
// such a frame may land inside it (and it moves the socket's write
// deadline to a second away): the peer misbehaved or asked to close,
// and gets a damaged last frame.
func (c *Conn) SendFramed(b []byte) error {
	if err := c.framedOpen(); err != nil {
		return err
	}
	payload := len(b) - headerLenOf(b)
	if c.raw != nil && c.pending.Load() == 0 && c.wmu.TryLock() {
		// Holding wmu, pending 0 and no carry mean every message sent
		// before this one is written, and the writer cannot start
		// another write; closed, that the close frame is written.
		if c.closed {
			c.wmu.Unlock()
			return ErrClosed
		}
		if c.pending.Load() == 0 && c.carry == nil {
			// A deadline in the past fails even a non-blocking write
			// (the socket's deadline is not moved while the connection
			// is idle).
			c.refreshDeadline()
			n, err := writeNow(c.raw, b)
			switch {
			case err == nil && n == len(b):
				c.wmu.Unlock()
				c.writes.Add(1)
				if c.opts.Written != nil {
					c.opts.Written(payload, nil)
				}
				return nil
			case err == nil || wouldBlock(err):
				// The rest goes before anything else (carry), and a
				// marker wakes the writer to write it. A full queue has
				// frames that wake it anyway.
				c.carry, c.carryPayload = b[n:], payload
				c.pending.Add(1)
				select {
				case c.q <- frame{framed: true, marker: true}:
				default:
					c.pending.Add(-1)
				}
				c.wmu.Unlock()
				return nil
			default:
				c.wmu.Unlock()
				c.Close(Reason{Code: websocket.CloseAbnormalClosure, Text: "write: " + err.Error(), Err: err})
				return ErrClosed
			}
		}
		c.wmu.Unlock()
	}
	return c.queue(frame{framed: true, data: b, payload: payload})
}

// QueueFramed is SendFramed without the direct write: the frame goes
// through the writer, which writes what queued up meanwhile in one
// write. For a burst of frames, which direct writes would send one write
// each.
func (c *Conn) QueueFramed(b []byte) error {
	if err := c.framedOpen(); err != nil {
		return err
	}
	return c.queue(frame{framed: true, data: b, payload: len(b) - headerLenOf(b)})
}

// framedOpen is why SendFramed and QueueFramed cannot take a frame: the
// connection has no ServerFrames, or it is closed; nil if they can.
func (c *Conn) framedOpen() error {
	if !c.opts.ServerFrames {
		return ErrNotServerFrames
	}
	select {
	case <-c.quit:
		return ErrClosed
	default:
	}
	return nil
}

// headerLenOf is the header length of a frame made by Frame.
func headerLenOf(b []byte) int {
	if len(b) < 2 {
		return len(b)
	}
	switch b[1] & 0x7f {
	case 126:
		return 4
	case 127:
		return 10
	}
	return 2
}
