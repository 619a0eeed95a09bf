package server_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/energyscope/energyscope/internal/testcluster"
	"github.com/energyscope/energyscope/internal/testpg"
	"github.com/energyscope/energyscope/server"
	"github.com/energyscope/energyscope/server/deltalog"
)

// TestTrimKeepsWhatRetainedVintagesNeed: two replicas over one lake
// (PostgreSQL catalog, file:// warehouse) and one delta log (a JetStream
// node; B reaches it through a loopback proxy) that never follow the
// lake's heads at run time. B serves the first vintage V0 and is cut off
// from the log; meanwhile A logs rows and compacts twice (V1, V2). The
// lake retains V0, so A's trims keep the records above V0's covers: B,
// reconnected, applies every row it missed from the log (before, A
// trimmed below V1's covers and B retried forever). Once V0 and V1
// expire from the lake, the next compaction trims below the oldest
// retained vintage's covers.
func TestTrimKeepsWhatRetainedVintagesNeed(t *testing.T) {
	pg := testpg.Start(t)
	wh := t.TempDir()
	node, err := deltalog.StartNode(deltalog.NodeOptions{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer node.Shutdown()
	px, err := testcluster.NewProxy(strings.TrimPrefix(node.ClientURL(), "nats://"))
	if err != nil {
		t.Fatal(err)
	}
	defer px.Close()
	connect := func(url string) *deltalog.Log {
		l, err := deltalog.Connect(url, deltalog.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(l.Close)
		return l
	}
	a := startReplica(t, pg.URI, wh, server.Options{LakePoll: -1, DeltaLog: connect(node.ClientURL())})
	a.put(100)
	dlB := connect("nats://" + px.Addr())
	b := startReplica(t, pg.URI, wh, server.Options{LakePoll: -1, DeltaLog: dlB})
	v0, m0, _ := a.srv.Head("px")
	if h, _, ok := b.srv.Head("px"); !ok || h.Snapshot != v0.Snapshot {
		t.Fatalf("B at start serves %+v, want A's %s", h, v0.Snapshot)
	}

	day := 4
	ingest := func() {
		t.Helper()
		if code, body := a.do("POST", "/v1/datasets/px/rows", "text/csv", fmt.Sprintf("series_id,period,value\nA,2026-10-%02d,%d\n", day, 1000+day)); code != 200 {
			t.Fatalf("ingest on A: %d %s", code, body)
		}
		day++
	}
	compact := func() uint64 {
		t.Helper()
		if code, body := a.do("POST", "/v1/datasets/px/compact", "", ""); code != 200 {
			t.Fatalf("compact on A: %d %s", code, body)
		}
		_, m, _ := a.srv.Head("px")
		return m.CoversThroughSeq
	}
	applied := func(r *replica) uint64 {
		for _, d := range r.srv.LogState().Datasets {
			if d.Name == "px" {
				return d.Applied
			}
		}
		return 0
	}
	ingest()
	head, _ := a.srv.DeltaLog().Head(context.Background(), "px")
	within(t, 10*time.Second, "B applies A's first row", func() bool { return applied(b) == head })

	px.Cut()
	within(t, 20*time.Second, "B sees it is cut off from the log", func() bool { up, _ := dlB.Connected(); return !up })
	ingest()
	ingest()
	c1 := compact()
	ingest()
	ingest()
	compact()
	ingest()
	head, _ = a.srv.DeltaLog().Head(context.Background(), "px")
	px.Resume()
	within(t, 20*time.Second, "B, reconnected, applies the rows it missed from the log", func() bool { return applied(b) == head })
	if h, _, _ := b.srv.Head("px"); h.Snapshot != v0.Snapshot {
		t.Fatalf("B serves %s, want V0 %s (it does not follow the lake)", h.Snapshot, v0.Snapshot)
	}
	for d := 4; d < day; d++ {
		p := fmt.Sprintf("2026-10-%02d", d)
		if code, body := b.do("GET", "/v1/series/A?from="+p+"&to="+p, "", ""); code != 200 || !strings.Contains(body, fmt.Sprint(1000+d)) {
			t.Fatalf("B's A on %s: %d %q", p, code, body)
		}
	}

	// Retention releases the log: keep the current vintage only, then a
	// compaction trims below the oldest vintage left.
	ctx := context.Background()
	if _, err := a.l.Expire(ctx, "px", 1, 0); err != nil {
		t.Fatal(err)
	}
	_, m2, _ := a.srv.Head("px")
	ingest()
	ingest()
	compact()
	for _, c := range []uint64{m0.CoversThroughSeq, c1} {
		if _, err := a.srv.DeltaLog().Read(ctx, "px", c+1); !errors.Is(err, deltalog.ErrTrimmed) {
			t.Fatalf("the log from seq %d after the vintage covering %d expired: %v, want ErrTrimmed", c+1, c, err)
		}
	}
	if recs, err := a.srv.DeltaLog().Read(ctx, "px", m2.CoversThroughSeq+1); err != nil || len(recs) == 0 {
		t.Fatalf("the log above the oldest retained vintage's covers: %d records, %v", len(recs), err)
	}
}
