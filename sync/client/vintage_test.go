package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/energyscope/energyscope/internal/wiring"
	"github.com/energyscope/energyscope/localcache"
	"github.com/energyscope/energyscope/sync/client"
	"github.com/energyscope/energyscope/sync/protocol"
)

// TestVintageRequestErrorsAreTyped: the errors of Vintage and Revisions
// are types a caller checks: ErrOffline before any connection, a
// *RequestError carrying the server's code (a real server without a lake
// answers no_lake), and bad arguments refused before anything is sent.
func TestVintageRequestErrorsAreTyped(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// Not connected yet: ErrOffline, at once.
	st, err := localcache.Open(t.TempDir(), &localcache.Options{CompactRows: -1, CompactBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	idle := client.New(wiring.Sink{Store: st}, client.Options{Server: "http://127.0.0.1:1"})
	if _, err := idle.Vintage(ctx, "stocks", "2026-10-01", nil); !errors.Is(err, client.ErrOffline) {
		t.Fatalf("vintage offline: %v", err)
	}
	if _, err := idle.Revisions(ctx, "stocks", "MSFT", "2000-01-01"); !errors.Is(err, client.ErrOffline) {
		t.Fatalf("revisions offline: %v", err)
	}

	_, hs := newServer(t)
	_, eng := newCompanion(t, hs.URL)
	eventually(t, "online", func() bool { return eng.Progress().Online })
	for _, c := range []struct {
		name string
		do   func() error
	}{
		{"vintage", func() error { _, err := eng.Vintage(ctx, "stocks", "2026-10-01", nil); return err }},
		{"revisions", func() error { _, err := eng.Revisions(ctx, "stocks", "MSFT", "2000-01-01"); return err }},
	} {
		var re *client.RequestError
		if err := c.do(); !errors.As(err, &re) || re.Code != protocol.ErrorNoLake {
			t.Errorf("%s on a server without a lake: %v", c.name, err)
		}
	}
	// The connection went on: a second request is answered too.
	var re *client.RequestError
	if _, err := eng.Vintage(ctx, "stocks", "e1-s0-0123456789ab", nil); !errors.As(err, &re) || re.Code != protocol.ErrorNoLake {
		t.Errorf("second vintage request: %v", err)
	}
	if n := eng.Stats.Sessions.Load(); n != 1 {
		t.Errorf("%d sessions, want 1", n)
	}
	// Bad arguments never reach the server.
	for _, err := range []error{
		func() error { _, err := eng.Vintage(ctx, "no/such", "2026-10-01", nil); return err }(),
		func() error { _, err := eng.Vintage(ctx, "stocks", "", nil); return err }(),
		func() error { _, err := eng.Revisions(ctx, "stocks", "", "2000-01-01"); return err }(),
	} {
		if err == nil || errors.As(err, &re) || errors.Is(err, client.ErrOffline) {
			t.Errorf("bad argument: %v", err)
		}
	}
}
