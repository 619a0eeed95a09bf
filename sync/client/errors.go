package client

import (
	"errors"
	"fmt"
	"time"

	"github.com/gorilla/websocket"
)

// Errors a caller (a UI) tells apart with errors.Is; Progress.Err holds
// the engine's last one. Their messages are what Progress.LastError and
// the companion's status show.
var (
	// ErrUnauthorized: the server refused the token (HTTP 401 at the
	// websocket upgrade). The engine keeps retrying: the token may be
	// added on the server meanwhile.
	ErrUnauthorized = errors.New("server refused the token (401)")
	// ErrNotSyncServer: the URL answered HTTP but refused the websocket
	// upgrade to the sync protocol (a web page, a proxy, a 403 for a
	// token without the sync scope). It is websocket.ErrBadHandshake.
	ErrNotSyncServer = websocket.ErrBadHandshake
)

// ErrProtocolVersion: the server does not speak a protocol version this
// client speaks (a version 1 server, say); the error names both.
var ErrProtocolVersion = errors.New("no common protocol version with the server")

// MalformedError: the server sent a control message (Frame false) or a
// binary frame (Frame true) that this client refuses; nothing of it is
// applied, the connection ends and is made again later. Err is the
// decoder's error (it wraps protocol.ErrMalformed and, where one applies,
// protocol.ErrUnknownType, protocol.ErrUnknownFrame, format.ErrBadRecord
// or the JSON error); the message is Err's.
type MalformedError struct {
	Frame bool
	Err   error
}

func (e *MalformedError) Error() string { return e.Err.Error() }

func (e *MalformedError) Unwrap() error { return e.Err }

// ApplyError is a dataset whose records could not be made durable
// locally (a full or read-only disk, a failed fsync). It is not a
// connection failure: the session stays up and the other datasets stay
// live, while this one retries by itself, with exponential backoff and
// jitter, by subscribing again from what it holds.
type ApplyError struct {
	Dataset  string
	Attempts int       // consecutive failures
	RetryAt  time.Time // when the engine subscribes the dataset again
	Err      error     // the sink's error
}

func (e *ApplyError) Error() string {
	return fmt.Sprintf("apply %s (attempt %d, retry at %s): %v", e.Dataset, e.Attempts, e.RetryAt.Format(time.RFC3339), e.Err)
}

func (e *ApplyError) Unwrap() error { return e.Err }
