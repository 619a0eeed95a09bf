package server

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestCloseDoesNotWaitOnExpiry: the retention pass a publish sets off
// runs on the server's context, so Close cancels it instead of waiting
// for it. The pass here blocks like a catalog that hangs (until its
// context ends, at most 20 s); Close must return well before that and
// the pass must have seen context.Canceled.
func TestCloseDoesNotWaitOnExpiry(t *testing.T) {
	f, _ := lakeFixture(t, t.TempDir(), Options{KeepVintages: 1})
	entered := make(chan struct{})
	ended := make(chan error, 1)
	f.srv.vint.beforeExpire = func(ctx context.Context) {
		close(entered)
		select {
		case <-ctx.Done():
			ended <- ctx.Err()
		case <-time.After(20 * time.Second):
			ended <- errors.New("the pass's context was not cancelled in 20 s")
		}
	}
	f.putStocks()
	select {
	case <-entered:
	case <-time.After(30 * time.Second):
		t.Fatal("the publish set off no retention pass")
	}
	f.hs.Close()
	closed := make(chan struct{})
	start := time.Now()
	go func() { f.srv.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		<-closed
		t.Fatalf("Close waited %v for a hanging retention pass", time.Since(start).Round(time.Second))
	}
	if err := <-ended; !errors.Is(err, context.Canceled) {
		t.Fatalf("the retention pass ended with %v, want context.Canceled (Close's)", err)
	}
}
