package server

import "errors"

// Sentinel errors of the server's input paths. The HTTP layer maps them to
// status codes with errors.Is (http.go); everything else is a 500.
var (
	// ErrBadInput: the request's rows or source file cannot be accepted
	// as sent (malformed, invalid values, unknown op, ...). HTTP 400.
	ErrBadInput = errors.New("bad input")
	// ErrTooLarge: the request's body or batch exceeds a limit. HTTP 413.
	ErrTooLarge = errors.New("too large")
)
