package client_test

import (
	"net/http/httptest"
	"testing"
	"time"

	"github.com/energyscope/energyscope/server"
	"github.com/energyscope/energyscope/server/deltalog"
	"github.com/energyscope/energyscope/sync/client"
)

// startRigOn is startRig with the server's delta log on l (shared by
// replicas).
func startRigOn(t *testing.T, home string, l *deltalog.Log) *rig {
	t.Helper()
	r := &rig{t: t, home: home, log: &logBuf{}}
	r.log.dumpOnFailure(t, "server "+home)
	var err error
	r.srv, err = server.New(server.Options{Home: home, Logger: r.log.logger(), CompactRows: -1, CompactBytes: -1, DeltaLog: l})
	if err != nil {
		t.Fatal(err)
	}
	r.hs = httptest.NewServer(r.srv.Handler())
	t.Cleanup(r.close)
	return r
}

// TestReplicasFanOutAndFailOver (issue 13): two servers on one delta
// log. A companion of B receives the rows ingested through A (B's
// follower applies them and its hub fans them out); when B goes away the
// companion resumes on A from its last seq, with no download: a seq is
// the same record on every replica of the log.
func TestReplicasFanOutAndFailOver(t *testing.T) {
	node, err := deltalog.StartNode(deltalog.NodeOptions{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(node.Shutdown)
	conn := func() *deltalog.Log {
		l, err := deltalog.Connect(node.ClientURL(), deltalog.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(l.Close)
		return l
	}
	a := startRigOn(t, t.TempDir(), conn())
	b := startRigOn(t, t.TempDir(), conn())
	ma, err := a.srv.Replace("stocks", []string{stocks}, stocksOpts)
	if err != nil {
		t.Fatal(err)
	}
	mb, err := b.srv.Replace("stocks", []string{stocks}, stocksOpts)
	if err != nil {
		t.Fatal(err)
	}
	if ma.SnapshotID != mb.SnapshotID {
		t.Fatalf("the replicas cooked different snapshots: %s, %s", ma.SnapshotID, mb.SnapshotID)
	}
	st := openCompStore(t, t.TempDir())
	c := startComp(t, st, nil, client.Options{Server: b.hs.URL + "," + a.hs.URL, MaxBackoff: 300 * time.Millisecond})
	c.waitState(ma.SnapshotID, 0, 20*time.Second)
	var last uint64
	for i := range 5 {
		last = a.ingest(row("T", i, float64(i)))
	}
	c.waitState(ma.SnapshotID, last, 20*time.Second)
	sameAsServer(t, b.srv, st, "T")
	if m := c.eng.Metrics(); m.Server != b.hs.URL {
		t.Fatalf("the companion is on %s, want B %s", m.Server, b.hs.URL)
	}

	b.close()
	for i := 5; i < 10; i++ {
		last = a.ingest(row("T", i, float64(i)))
	}
	c.waitState(ma.SnapshotID, last, 20*time.Second)
	sameAsServer(t, a.srv, st, "T")
	m := c.eng.Metrics()
	if m.Server != a.hs.URL || m.Failovers < 1 {
		t.Fatalf("after B closed: on %s with %d failovers, want A %s", m.Server, m.Failovers, a.hs.URL)
	}
	if n := c.eng.Stats.DownloadRebases.Load(); n != 1 {
		t.Fatalf("%d snapshot downloads, want 1 (the first): the resume on A must catch up by deltas", n)
	}
}
