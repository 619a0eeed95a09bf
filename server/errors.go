package server

import (
	"errors"
	"net/http"
	"os"

	"github.com/energyscope/energyscope/localcache"
	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/server/cook"
)

// Sentinel errors of the server's input paths. The HTTP layer maps them to
// status codes with errors.Is (statusOf); everything else is a 500.
var (
	// ErrBadInput: the request's rows or source file cannot be accepted
	// as sent (malformed, invalid values, unknown op, ...). HTTP 400.
	// It is cook's ErrBadInput, which every *cook.InputError matches, so
	// a bad source file of a PUT is bad input too.
	ErrBadInput = cook.ErrBadInput
	// ErrTooLarge: the request's body or batch exceeds a limit. HTTP 413.
	ErrTooLarge = errors.New("too large")
	// ErrConflict: the request contradicts the home's state, e.g. a new
	// dataset whose name differs only by case from an existing one (one
	// directory on Windows and macOS). HTTP 409.
	ErrConflict = errors.New("conflict")
)

// statusOf maps an error of a request to its HTTP status. Order matters:
// a too-large input is also a bad one.
func statusOf(err error) int {
	var mbe *http.MaxBytesError
	switch {
	case errors.Is(err, ErrTooLarge), errors.As(err, &mbe):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, os.ErrDeadlineExceeded):
		return http.StatusRequestTimeout
	case errors.Is(err, ErrBadInput), errors.Is(err, format.ErrBadRecord):
		return http.StatusBadRequest
	case errors.Is(err, ErrConflict):
		return http.StatusConflict
	case errors.Is(err, ErrLakeUnavailable), errors.Is(err, ErrNotApplied):
		return http.StatusServiceUnavailable
	case errors.Is(err, localcache.ErrDamaged):
		// Until a PUT installs a good snapshot over it. Before not found:
		// a plain id found in no healthy dataset while one is damaged may
		// be in the damaged one (the error wraps both).
		return http.StatusServiceUnavailable
	case errors.Is(err, localcache.ErrNoDataset), errors.Is(err, localcache.ErrNotFound):
		return http.StatusNotFound
	}
	return http.StatusInternalServerError
}

// badInput marks err as the client's (ErrBadInput) unless it already says
// which kind it is.
func badInput(err error) error {
	if err == nil || statusOf(err) != http.StatusInternalServerError {
		return err
	}
	return inputError{err}
}

// inputError is an error of the client's input: it matches ErrBadInput
// and says only what err says.
type inputError struct{ err error }

func (e inputError) Error() string        { return e.err.Error() }
func (e inputError) Unwrap() error        { return e.err }
func (e inputError) Is(target error) bool { return target == ErrBadInput }
