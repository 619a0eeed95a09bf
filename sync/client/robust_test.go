package client_test

// In-process tests of the sync engine against the real server and hub:
// server restarts (crash between the history and the store), rebase by
// download when a local compaction does not match, refused connections
// (tokens, malformed or oversize frames, unknown protocol versions) with
// the local data still serving, and corruption of single frames in
// transit (a chunk's bytes, a chunk's header).

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/energyscope/energyscope/internal/wiring"
	"github.com/energyscope/energyscope/localcache"
	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/server"
	"github.com/energyscope/energyscope/sync/client"
)

// logBuf collects log output for assertions; safe for concurrent use.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (l *logBuf) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// dumpOnFailure logs the collected lines if the test failed.
func (l *logBuf) dumpOnFailure(t *testing.T, name string) {
	t.Cleanup(func() {
		if t.Failed() {
			s := l.String()
			if len(s) > 16<<10 {
				s = "..." + s[len(s)-16<<10:]
			}
			t.Logf("--- %s log:\n%s", name, s)
		}
	})
}

// rig is an in-process server on a home, behind httptest.
type rig struct {
	t    *testing.T
	home string
	srv  *server.Server
	hs   *httptest.Server
	log  *logBuf
}

func startRig(t *testing.T, home string, tokens *server.Tokens) *rig {
	t.Helper()
	r := &rig{t: t, home: home, log: &logBuf{}}
	r.log.dumpOnFailure(t, "server "+home)
	var err error
	r.srv, err = server.New(server.Options{Home: home, Logger: r.log.logger(), Tokens: tokens, CompactRows: -1, CompactBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	r.hs = httptest.NewServer(r.srv.Handler())
	t.Cleanup(r.close)
	return r
}

func (r *rig) close() {
	if r.hs != nil {
		r.hs.CloseClientConnections()
		r.hs.Close()
		r.srv.Close()
		r.hs = nil
	}
}

func (r *rig) ingest(recs ...format.Record) uint64 {
	r.t.Helper()
	_, last, err := r.srv.Ingest("stocks", recs)
	if err != nil {
		r.t.Fatal(err)
	}
	return last
}

// row is an upsert of series id at day d (days after 2030-01-01).
func row(id string, d int, v float64) format.Record {
	return format.Record{Op: format.Upsert, SeriesID: id, Period: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, d).Unix(), Value: v}
}

// comp is a companion: a store and an engine running on it.
type comp struct {
	t      *testing.T
	st     *localcache.Store
	eng    *client.Engine
	log    *logBuf
	cancel context.CancelFunc
	done   chan struct{}
}

func openCompStore(t *testing.T, home string) *localcache.Store {
	t.Helper()
	st, err := localcache.Open(home, &localcache.Options{CompactRows: -1, CompactBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// startComp runs an engine on st until stop (or the test's end).
func startComp(t *testing.T, st *localcache.Store, sink client.Sink, o client.Options) *comp {
	t.Helper()
	c := &comp{t: t, st: st, log: &logBuf{}, done: make(chan struct{})}
	c.log.dumpOnFailure(t, "companion")
	if sink == nil {
		sink = wiring.Sink{Store: st}
	}
	if o.Name == "" {
		o.Name = "companion"
	}
	if o.MaxBackoff == 0 {
		o.MaxBackoff = time.Second
	}
	o.Logger = c.log.logger()
	c.eng = client.New(sink, o)
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	go func() { c.eng.Run(ctx); close(c.done) }()
	t.Cleanup(c.stop)
	return c
}

func (c *comp) stop() {
	c.cancel()
	<-c.done
}

// waitFor polls f for up to d.
func waitFor(t *testing.T, d time.Duration, what string, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (c *comp) waitState(snap string, seq uint64, d time.Duration) {
	c.t.Helper()
	waitFor(c.t, d, fmt.Sprintf("companion at snapshot %q seq >= %d", snap, seq), func() bool {
		_, id, s, err := c.st.State("stocks")
		return err == nil && (snap == "" || id == snap) && s >= seq
	})
}

// sameAsServer checks every touched series and the head against the
// server's store.
func sameAsServer(t *testing.T, srv *server.Server, st *localcache.Store, ids ...string) {
	t.Helper()
	_, sid, sseq, err := srv.Store().State("stocks")
	if err != nil {
		t.Fatal(err)
	}
	_, cid, cseq, err := st.State("stocks")
	if err != nil {
		t.Fatal(err)
	}
	if sid != cid || sseq != cseq {
		t.Fatalf("companion at %s seq %d, server %s seq %d", cid, cseq, sid, sseq)
	}
	for _, id := range ids {
		sp, sv, err1 := srv.Store().Copy(id, -1<<62, 1<<62)
		cp, cv, err2 := st.Copy(id, -1<<62, 1<<62)
		if err1 != nil || err2 != nil || !slices.Equal(sp, cp) || !slices.Equal(sv, cv) {
			t.Fatalf("%s differs: server %v %v %v, companion %v %v %v", id, sp, sv, err1, cp, cv, err2)
		}
	}
}

func newStocksRig(t *testing.T, tokens *server.Tokens) *rig {
	t.Helper()
	r := startRig(t, t.TempDir(), tokens)
	if _, err := r.srv.Replace("stocks", []string{stocks}, stocksOpts); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestServerRestartCatchesUpFromTheLog: the server keeps no history of
// its own; after a restart it rebuilds its catch-up tail from the delta
// log (issue 13). A companion that was behind catches up by deltas (no
// download) and the next ingest continues the seqs.
func TestServerRestartCatchesUpFromTheLog(t *testing.T) {
	home := t.TempDir()
	r := startRig(t, home, nil)
	if _, err := r.srv.Replace("stocks", []string{stocks}, stocksOpts); err != nil {
		t.Fatal(err)
	}
	snap, _, _ := r.srv.Head("stocks")
	for i := range 5 {
		r.ingest(row("T", i, float64(i)))
	}
	st := openCompStore(t, t.TempDir())
	c := startComp(t, st, nil, client.Options{Server: r.hs.URL})
	c.waitState(snap.Snapshot, 5, 20*time.Second)
	c.stop()

	// The companion is now behind: 6..10 happen while it is away.
	for i := 5; i < 10; i++ {
		r.ingest(row("T", i, float64(i)))
	}
	r.close()
	r = startRig(t, home, nil)
	if got := r.ingest(row("T", 10, 10)); got != 11 {
		t.Fatalf("the next ingest got seq %d, want 11", got)
	}
	c = startComp(t, st, nil, client.Options{Server: r.hs.URL})
	c.waitState(snap.Snapshot, 11, 20*time.Second)
	sameAsServer(t, r.srv, st, "T")
	if n := c.eng.Stats.DownloadRebases.Load(); n != 0 {
		t.Fatalf("the companion downloaded %d snapshots; the tail should have caught it up", n)
	}
	c.stop()

	// Restart again: the tail is rebuilt again.
	r.ingest(row("T", 11, 11))
	r.close()
	r = startRig(t, home, nil)
	if n := r.srv.Hub().Stats().Rebases; n != 0 {
		t.Fatalf("%d rebases before any companion connected", n)
	}
	c = startComp(t, st, nil, client.Options{Server: r.hs.URL})
	c.waitState(snap.Snapshot, 12, 20*time.Second)
	sameAsServer(t, r.srv, st, "T")
	if n := c.eng.Stats.DownloadRebases.Load(); n != 0 || r.srv.Hub().Stats().Rebases != 0 {
		t.Fatalf("downloads %d; server log:\n%s", n, r.log.String())
	}
	if v, ok := value(st, "T", row("T", 10, 0).Period); !ok || v != 10 {
		t.Fatalf("T at day 10 = %v %v, want 10", v, ok)
	}
}

// mismatchSink is a sink whose local compaction reports different SHA-256s
// than the server's snapshot: the engine must fall back to downloading.
type mismatchSink struct {
	wiring.Sink
	calls atomic.Int32
}

func (m *mismatchSink) CompactThrough(ds string, seq uint64, version int) (*format.Manifest, error) {
	man, err := m.Sink.CompactThrough(ds, seq, version)
	if err != nil {
		return nil, err
	}
	m.calls.Add(1)
	bad := *man
	bad.Files = slices.Clone(man.Files)
	bad.Files[0].SHA256 = strings.Repeat("0", 64)
	return &bad, nil
}

// TestRebaseBothWays: after a server compaction a live companion rebases
// by compacting locally; one whose local compaction does not match falls
// back to downloading the server's snapshot, and both stay live.
func TestRebaseBothWays(t *testing.T) {
	r := newStocksRig(t, nil)
	okStore := openCompStore(t, t.TempDir())
	badStore := openCompStore(t, t.TempDir())
	bad := &mismatchSink{Sink: wiring.Sink{Store: badStore}}
	good := startComp(t, okStore, nil, client.Options{Server: r.hs.URL})
	mis := startComp(t, badStore, bad, client.Options{Server: r.hs.URL})
	head, _, _ := r.srv.Head("stocks")
	var last uint64
	for i := range 10 {
		last = r.ingest(row("T", i, float64(i)))
	}
	good.waitState(head.Snapshot, last, 20*time.Second)
	mis.waitState(head.Snapshot, last, 20*time.Second)

	m, err := r.srv.Compact("stocks")
	if err != nil {
		t.Fatal(err)
	}
	good.waitState(m.SnapshotID, last, 20*time.Second)
	waitFor(t, 20*time.Second, "the mismatching companion to download", func() bool {
		_, ok := mis.eng.Metrics().Download(m.SnapshotID)
		return ok
	})
	mis.waitState(m.SnapshotID, last, 20*time.Second)
	// The good companion's one local rebase is to the server's new
	// snapshot (its one download was the first sync).
	var local []client.RebaseMetrics
	for _, rb := range good.eng.Metrics().Rebases {
		if rb.Local {
			local = append(local, rb)
		}
	}
	if good.eng.Stats.LocalRebases.Load() != 1 || good.eng.Stats.DownloadRebases.Load() != 1 ||
		len(local) != 1 || local[0].Dataset != "stocks" || local[0].Snapshot != m.SnapshotID {
		t.Fatalf("good companion: %d local rebases, %d downloads, rebases %+v", good.eng.Stats.LocalRebases.Load(), good.eng.Stats.DownloadRebases.Load(), good.eng.Metrics().Rebases)
	}
	if bad.calls.Load() != 1 || mis.eng.Stats.LocalRebases.Load() != 0 || mis.eng.Stats.DownloadRebases.Load() != 2 ||
		mis.eng.Metrics().CompactionMismatches != 1 {
		t.Fatalf("mismatching companion: %d compactions, %d local rebases, %d downloads", bad.calls.Load(), mis.eng.Stats.LocalRebases.Load(), mis.eng.Stats.DownloadRebases.Load())
	}
	// Both still live.
	last = r.ingest(row("T", 20, 20))
	good.waitState(m.SnapshotID, last, 20*time.Second)
	mis.waitState(m.SnapshotID, last, 20*time.Second)
	sameAsServer(t, r.srv, okStore, "T", "MSFT")
	sameAsServer(t, r.srv, badStore, "T", "MSFT")
}
