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
// Gorilla's reply to the peer's close frame is written from the reading
// goroutine, outside wmu: after a direct write that was cut short it may
// land inside that frame. The peer asked to close, and the connection
// ends either way.
func (c *Conn) SendFramed(b []byte) error {
	if !c.opts.ServerFrames {
		return ErrNotServerFrames
	}
	select {
	case <-c.quit:
		return ErrClosed
	default:
	}
	payload := len(b) - headerLenOf(b)
	if c.raw != nil && c.pending.Load() == 0 && c.wmu.TryLock() {
		// Holding wmu, pending 0 means every message sent before this one
		// is written, and the writer cannot start another write.
		if c.pending.Load() == 0 {
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
				// The rest goes before anything later: the queue is empty
				// (pending is 0) and the writer waits for wmu.
				err = c.queue(frame{framed: true, data: b[n:], payload: payload})
				c.wmu.Unlock()
				if err != nil && n > 0 {
					// Half a frame is on the wire and the rest has no
					// room: the stream cannot go on.
					c.Close(Reason{Code: websocket.CloseAbnormalClosure, Text: err.Error(), Err: err})
				}
				return err
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
	if !c.opts.ServerFrames {
		return ErrNotServerFrames
	}
	select {
	case <-c.quit:
		return ErrClosed
	default:
	}
	return c.queue(frame{framed: true, data: b, payload: len(b) - headerLenOf(b)})
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
