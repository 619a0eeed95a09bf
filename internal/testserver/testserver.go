// Package testserver starts a central server over the samples for tests
// of what sits above the server's wire: the companion and the desktop app
// (a real server, in process, on loopback). It is
// imported by tests only; tests below the server (the hub's, the sync
// client's, the functions') build their homes with internal/testhome.
package testserver

import (
	"net/http/httptest"
	"testing"

	"github.com/energyscope/energyscope/internal/testhome"
	"github.com/energyscope/energyscope/server"
)

// SampleServer starts a central server (in process, on loopback) over a
// fresh home with the samples cooked, closed when the test ends, and
// returns it with its URL.
func SampleServer(tb testing.TB) (*server.Server, string) {
	tb.Helper()
	home := tb.TempDir()
	testhome.CookSamples(tb, home)
	srv, err := server.New(server.Options{Home: home})
	if err != nil {
		tb.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	tb.Cleanup(func() { hs.Close(); srv.Close() })
	return srv, hs.URL
}
