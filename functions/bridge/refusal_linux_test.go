package bridge

import (
	"context"
	"log/slog"
	"net/http"
	"sync/atomic"
	"testing"
	"time"
)

// warnCounter counts the log records at Warn or above.
type warnCounter struct{ n atomic.Int64 }

func (c *warnCounter) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (c *warnCounter) Handle(context.Context, slog.Record) error {
	c.n.Add(1)
	return nil
}
func (c *warnCounter) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *warnCounter) WithGroup(string) slog.Handler      { return c }

// TestRefusalLogIsRateLimited: the bridge logged one warning per refused
// connection, so a local user looping connections could fill the log.
// Now the first refusal of each user is logged, then at most one summary
// per interval; Metrics counts every refusal and every record.
func TestRefusalLogIsRateLimited(t *testing.T) {
	logs := &warnCounter{}
	b := startBridge(t, t.TempDir(), func(o *Options) { o.Logger = slog.New(logs) })
	// Every client is "another user": the bridge believes it runs as the
	// next uid (the real lookup runs, through sock_diag or /proc).
	b.peers = &peerChecker{uid: b.peers.uid + 1}
	refuse := func(n int) {
		t.Helper()
		for range n {
			resp, _ := b.do(t, "GET", "/v1/status", nil, map[string]string{"Authorization": "Bearer " + b.Token()})
			if resp.StatusCode != http.StatusForbidden {
				t.Fatalf("status %d, want 403", resp.StatusCode)
			}
		}
	}
	setEvery := func(d time.Duration) {
		b.refusals.mu.Lock()
		b.refusals.every = d
		b.refusals.mu.Unlock()
	}

	setEvery(time.Hour)
	refuse(100)
	m := b.Metrics()
	if m.PeersRefused != 100 || m.RefusalLogs != 1 || logs.n.Load() != 1 {
		t.Fatalf("after 100 refusals of one user: %+v, %d warnings; want 100 refused, 1 record", m, logs.n.Load())
	}
	// Once the interval has passed, the next refusal writes one summary.
	setEvery(time.Nanosecond)
	refuse(1)
	setEvery(time.Hour)
	refuse(20)
	m = b.Metrics()
	if m.PeersRefused != 121 || m.RefusalLogs != 2 || logs.n.Load() != 2 {
		t.Fatalf("after the summary: %+v, %d warnings; want 121 refused, 2 records", m, logs.n.Load())
	}
}
