package app

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"strings"
	"syscall"
	"unicode"
	"unicode/utf8"

	"github.com/energyscope/energyscope/functions"
	"github.com/energyscope/energyscope/functions/xlsx"
	"github.com/energyscope/energyscope/localcache"
	"github.com/energyscope/energyscope/sync/client"
)

var (
	errNoWindow   = errors.New("the window is not ready yet")
	errNotStarted = errors.New("the data store is not open")
)

// words turns an error into a sentence for the user. Errors become words
// only here, at the edge (STYLE.md 7): the known ones get a sentence that
// says what to do, the rest their message, capitalized.
func words(err error) string {
	if err == nil {
		return ""
	}
	var opErr *net.OpError
	switch {
	case errors.Is(err, ErrNotReady):
		return "The data store is still opening; try again in a moment."
	case errors.Is(err, localcache.ErrClosed):
		return "The data store was closed (the settings changed or the app is stopping); try again."
	case errors.Is(err, localcache.ErrHomeLocked):
		return "Another EnergyScope program (an `es companion`, or a second window) is using the data folder. Close it, or choose another data folder in Settings."
	case errors.Is(err, xlsx.ErrRequest):
		return sentence(err.Error())
	case errors.Is(err, functions.ErrNoData):
		return "No data in this range."
	case errors.Is(err, syscall.EADDRINUSE) || (errors.As(err, &opErr) && opErr.Op == "listen"):
		return "The Excel bridge could not start: its port is taken (is `es companion` running?). Choose another bridge port in Settings; Excel's add-in must then be sideloaded again."
	case errors.Is(err, fs.ErrPermission):
		return sentence("permission denied: " + err.Error())
	}
	return sentence(err.Error())
}

// seriesWords is words for an error about series id.
func seriesWords(id string, err error) string {
	if errors.Is(err, localcache.ErrNotFound) || errors.Is(err, functions.ErrNotFound) {
		return fmt.Sprintf("No series %q in the local data.", id)
	}
	return words(err)
}

// syncWords rewrites the sync engine's last error (Progress.Err).
func syncWords(err error) string {
	if err == nil {
		return ""
	}
	var dnsErr *net.DNSError
	var netErr net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "Cannot reach the server (connection refused); working offline with the local data."
	case errors.As(err, &dnsErr) && dnsErr.IsNotFound:
		return "Cannot find the server (unknown host name); check the server URL in Settings."
	case errors.Is(err, client.ErrUnauthorized):
		return "The server refused the token; check it in Settings."
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &netErr) && netErr.Timeout()):
		return "The server does not answer (time-out); working offline with the local data."
	case errors.Is(err, client.ErrNotSyncServer):
		return "The server at that URL does not speak EnergyScope sync; check the server URL in Settings."
	}
	return sentence("sync: " + err.Error())
}

// sentence capitalizes s and ends it with a period.
func sentence(s string) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return s
	}
	r, n := utf8.DecodeRuneInString(s)
	s = string(unicode.ToUpper(r)) + s[n:]
	if !strings.HasSuffix(s, ".") && !strings.HasSuffix(s, "?") && !strings.HasSuffix(s, "!") {
		s += "."
	}
	return s
}
