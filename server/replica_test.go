package server_test

// Replicas over one lake (replica.go): real servers, each with its own
// home, sharing a real PostgreSQL catalog (internal/testpg) and a file://
// warehouse, over real listeners; a real sync client on one of them.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/iceberg-go/table"

	"github.com/energyscope/energyscope/internal/testcluster"
	"github.com/energyscope/energyscope/internal/testpg"
	"github.com/energyscope/energyscope/internal/wiring"
	"github.com/energyscope/energyscope/localcache"
	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/server"
	"github.com/energyscope/energyscope/server/deltalog"
	"github.com/energyscope/energyscope/server/lake"
	"github.com/energyscope/energyscope/sync/client"
)

// replica is one server of a cluster test.
type replica struct {
	t    *testing.T
	home string
	srv  *server.Server
	hs   *httptest.Server
	l    *lake.Lake
}

// startReplica starts a server over a fresh home on the shared catalog
// and warehouse (no tokens: loopback test).
func startReplica(t *testing.T, catalogURI, warehouse string, o server.Options) *replica {
	t.Helper()
	r := &replica{t: t, home: t.TempDir()}
	var err error
	if r.l, err = lake.Open(context.Background(), lake.Options{Home: r.home, CatalogURI: catalogURI, Warehouse: warehouse}); err != nil {
		t.Fatal(err)
	}
	o.Home, o.Lake = r.home, r.l
	if o.CompactRows == 0 {
		o.CompactRows, o.CompactBytes = -1, -1
	}
	if r.srv, err = server.New(o); err != nil {
		r.l.Close()
		t.Fatal(err)
	}
	r.hs = httptest.NewServer(r.srv.Handler())
	t.Cleanup(r.close)
	return r
}

func (r *replica) close() {
	if r.srv == nil {
		return
	}
	r.hs.Close()
	r.srv.Close()
	r.l.Close()
	r.srv = nil
}

func (r *replica) do(method, path, ctype, body string) (int, string) {
	r.t.Helper()
	req, _ := http.NewRequest(method, r.hs.URL+path, strings.NewReader(body))
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// put replaces dataset px with series A and B over days 1..3, valued
// base+day.
func (r *replica) put(base int) {
	r.t.Helper()
	var b strings.Builder
	b.WriteString("series,date,value\n")
	for _, s := range []string{"A", "B"} {
		for d := 1; d <= 3; d++ {
			fmt.Fprintf(&b, "%s,2026-10-%02d,%d\n", s, d, base+d)
		}
	}
	if code, body := r.do("PUT", "/v1/datasets/px?series_col=series&period_col=date&value_col=value&frequency=D", "text/csv", b.String()); code != 200 {
		r.t.Fatalf("PUT: %d %s", code, body)
	}
}

// within polls cond every 20 ms for up to d.
func within(t *testing.T, d time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > d {
			t.Fatalf("not within %v: %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(start)
}

// TestReplicasFollowTheLake: two servers share one PostgreSQL catalog and
// one file:// warehouse. A PUT on A serves on B within 5 s (B installs
// A's vintage, it does not publish it again), a second PUT (a new epoch)
// and a compaction on A (the same epoch) as well, and a companion of B
// follows each.
func TestReplicasFollowTheLake(t *testing.T) {
	pg := testpg.Start(t)
	wh := t.TempDir()
	a := startReplica(t, pg.URI, wh, server.Options{})
	b := startReplica(t, pg.URI, wh, server.Options{})

	a.put(100)
	headA, _, _ := a.srv.Head("px")
	took := within(t, 5*time.Second, "B serves A's first PUT", func() bool {
		h, _, ok := b.srv.Head("px")
		return ok && h.Snapshot == headA.Snapshot
	})
	t.Logf("first PUT on A served by B after %v", took)
	if code, body := b.do("GET", "/v1/series/A?from=2026-10-01&to=2026-10-03", "", ""); code != 200 || !strings.Contains(body, "103") {
		t.Fatalf("B's answer for A: %d %s", code, body)
	}

	// A companion of B.
	st, err := localcache.Open(t.TempDir(), &localcache.Options{CompactRows: -1, CompactBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	eng := client.New(wiring.Sink{Store: st}, client.Options{Server: b.hs.URL, Name: t.Name()})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { eng.Run(ctx); close(done) }()
	defer func() { cancel(); <-done; st.Close() }()
	companionOn := func(snapshot string) func() bool {
		return func() bool { _, id, _, err := st.State("px"); return err == nil && id == snapshot }
	}
	within(t, 10*time.Second, "the companion of B syncs", companionOn(headA.Snapshot))

	// A new epoch on A.
	a.put(200)
	headA2, _, _ := a.srv.Head("px")
	if headA2.Epoch != headA.Epoch+1 {
		t.Fatalf("A's second PUT: epoch %d after %d", headA2.Epoch, headA.Epoch)
	}
	took = within(t, 5*time.Second, "B serves A's second PUT", func() bool {
		h, _, ok := b.srv.Head("px")
		return ok && h.Snapshot == headA2.Snapshot && h.Epoch == headA2.Epoch
	})
	t.Logf("second PUT (new epoch) on A served by B after %v", took)
	within(t, 10*time.Second, "B's companion on the new epoch", companionOn(headA2.Snapshot))
	if _, v, err := st.Copy("A", 0, 1<<40); err != nil || len(v) != 3 || v[2] != 203 {
		t.Fatalf("the companion's A after the new epoch: %v %v", v, err)
	}

	// A compaction on A: the same epoch, higher covers.
	if code, body := a.do("POST", "/v1/datasets/px/rows", "text/csv", "series_id,period,value\nA,2026-10-04,777\n"); code != 200 {
		t.Fatalf("ingest on A: %d %s", code, body)
	}
	if code, body := a.do("POST", "/v1/datasets/px/compact", "", ""); code != 200 {
		t.Fatalf("compact on A: %d %s", code, body)
	}
	headA3, mA3, _ := a.srv.Head("px")
	if headA3.Epoch != headA2.Epoch || mA3.CoversThroughSeq == 0 {
		t.Fatalf("A's compaction: epoch %d covers %d", headA3.Epoch, mA3.CoversThroughSeq)
	}
	took = within(t, 5*time.Second, "B serves A's compaction", func() bool {
		h, _, ok := b.srv.Head("px")
		return ok && h.Snapshot == headA3.Snapshot
	})
	t.Logf("compaction on A served by B after %v", took)
	if code, body := b.do("GET", "/v1/series/A?from=2026-10-04&to=2026-10-04", "", ""); code != 200 || !strings.Contains(body, "777") {
		t.Fatalf("B's answer for the compacted row: %d %s", code, body)
	}
	within(t, 10*time.Second, "B's companion has the compacted row", func() bool {
		p, v, err := st.Copy("A", 0, 1<<40)
		return err == nil && len(p) == 4 && v[3] == 777
	})

	// B published nothing: the lake holds A's three commits only.
	vs, err := a.l.Vintages(context.Background(), "px")
	if err != nil || len(vs) != 3 {
		t.Fatalf("the lake holds %d vintages (%v), want A's 3", len(vs), err)
	}
}

// health reads r's /healthz: the status and the typed answer.
func (r *replica) health() (int, server.Health) {
	r.t.Helper()
	code, body := r.do("GET", "/healthz", "", "")
	var h server.Health
	if err := json.Unmarshal([]byte(body), &h); err != nil {
		r.t.Fatalf("healthz: %d %q: %v", code, body, err)
	}
	return code, h
}

// TestReplicaWaitsForTheCatalog: a replica that starts while its catalog
// does not answer (a loopback proxy to PostgreSQL, cut) does not serve
// the lake's dataset and says so: /healthz answers 503, Replica.Serving
// false and a catalog wait. With the proxy back it installs the vintage
// within 5 s and answers 200, serving, nothing waited for.
func TestReplicaWaitsForTheCatalog(t *testing.T) {
	pg := testpg.Start(t)
	wh := t.TempDir()
	a := startReplica(t, pg.URI, wh, server.Options{})
	a.put(100)
	headA, _, _ := a.srv.Head("px")
	if code, h := a.health(); code != 200 || h.Replica == nil || !h.Replica.Serving || len(h.Replica.Waits) != 0 || h.State != server.HealthOK {
		t.Fatalf("A's health: %d %+v", code, h.Replica)
	}

	u, err := url.Parse(pg.URI)
	if err != nil {
		t.Fatal(err)
	}
	px, err := testcluster.NewProxy(u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer px.Close()
	u.Host = px.Addr()
	home := t.TempDir()
	l, err := lake.Open(context.Background(), lake.Options{Home: home, CatalogURI: u.String(), Warehouse: wh})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	px.Cut()
	srv, err := server.New(server.Options{Home: home, Lake: l, CompactRows: -1, CompactBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	b := &replica{t: t, home: home, srv: srv, hs: httptest.NewServer(srv.Handler()), l: l}
	defer func() { b.hs.Close(); b.srv.Close() }()
	code, h := b.health()
	if code != http.StatusServiceUnavailable || h.Replica == nil || h.Replica.Serving || h.State != server.HealthDegraded ||
		len(h.Replica.Waits) == 0 || h.Replica.Waits[0].Kind != server.WaitCatalog {
		t.Fatalf("B's health with the catalog cut: %d %+v", code, h.Replica)
	}
	if _, _, ok := b.srv.Head("px"); ok {
		t.Fatal("B serves px without the catalog")
	}

	px.Resume()
	took := within(t, 5*time.Second, "B serves A's vintage once the catalog answers", func() bool {
		h, _, ok := b.srv.Head("px")
		return ok && h.Snapshot == headA.Snapshot
	})
	t.Logf("served %v after the catalog came back", took)
	within(t, 5*time.Second, "B's healthz says serving", func() bool {
		code, h := b.health()
		return code == 200 && h.Replica.Serving && len(h.Replica.Waits) == 0 && h.Replica.Installed == 1 && h.Replica.LakeCheckedAt != nil && h.State == server.HealthOK
	})
}

// TestReplicasCompactAtOnce: two replicas hold the same pending record
// and compact at the same moment (not following the lake, so neither can
// install the other's vintage first). The pinned Iceberg commit is the
// arbiter: exactly one compaction lands, the other replica installs the
// winner's vintage instead (both answer 200 and serve one snapshot), and
// the warehouse holds no file the metadata does not reference.
func TestReplicasCompactAtOnce(t *testing.T) {
	pg := testpg.Start(t)
	wh := t.TempDir()
	a := startReplica(t, pg.URI, wh, server.Options{LakePoll: -1})
	a.put(100)
	b := startReplica(t, pg.URI, wh, server.Options{LakePoll: -1}) // installs A's vintage at start
	headA, _, _ := a.srv.Head("px")
	if h, _, ok := b.srv.Head("px"); !ok || h.Snapshot != headA.Snapshot {
		t.Fatalf("B at start serves %+v, want A's %s", h, headA.Snapshot)
	}
	for _, r := range []*replica{a, b} {
		if code, body := r.do("POST", "/v1/datasets/px/rows", "text/csv", "series_id,period,value\nA,2026-10-04,777\n"); code != 200 {
			t.Fatalf("ingest: %d %s", code, body)
		}
	}
	var wg sync.WaitGroup
	codes := make([]int, 2)
	bodies := make([]string, 2)
	for i, r := range []*replica{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i], bodies[i] = r.do("POST", "/v1/datasets/px/compact", "", "")
		}()
	}
	wg.Wait()
	for i := range codes {
		if codes[i] != 200 {
			t.Fatalf("compaction %d: %d %s", i, codes[i], bodies[i])
		}
	}
	ha, _, _ := a.srv.Head("px")
	hb, _, _ := b.srv.Head("px")
	if ha.Snapshot != hb.Snapshot || ha.Snapshot == headA.Snapshot {
		t.Fatalf("after compacting at once A serves %s, B %s (base %s): want one new snapshot", ha.Snapshot, hb.Snapshot, headA.Snapshot)
	}
	vs, err := a.l.Vintages(context.Background(), "px")
	if err != nil || len(vs) != 2 || vs[1].Snapshot != ha.Snapshot {
		t.Fatalf("the lake holds %+v (%v), want the PUT and one compaction", vs, err)
	}
	_, hA := a.health()
	_, hB := b.health()
	if hA.Replica.LostCompactions+hB.Replica.LostCompactions != 1 || len(hA.Replica.Waits)+len(hB.Replica.Waits) != 0 {
		t.Fatalf("lost compactions: A %d, B %d, want 1 in all; waits %+v %+v", hA.Replica.LostCompactions, hB.Replica.LostCompactions, hA.Replica.Waits, hB.Replica.Waits)
	}
	for _, r := range []*replica{a, b} {
		if code, body := r.do("GET", "/v1/series/A?from=2026-10-04&to=2026-10-04", "", ""); code != 200 || !strings.Contains(body, "777") {
			t.Fatalf("the compacted row: %d %s", code, body)
		}
	}
	tbl, err := a.l.Table(context.Background(), "px")
	if err != nil {
		t.Fatal(err)
	}
	checkNoOrphans(t, wh, tbl)
}

// checkNoOrphans fails if the warehouse directory holds a file tbl's
// metadata does not reference (a losing publish left it behind).
func checkNoOrphans(t *testing.T, warehouse string, tbl *table.Table) {
	t.Helper()
	refs, err := lake.ReferencedFiles(context.Background(), tbl)
	if err != nil {
		t.Fatal(err)
	}
	ref := map[string]bool{}
	for _, p := range refs {
		ref[p] = true
	}
	var orphans []string
	filepath.WalkDir(warehouse, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && !ref[p] {
			orphans = append(orphans, p)
		}
		return nil
	})
	if len(orphans) > 0 {
		t.Fatalf("the warehouse holds files no metadata references: %v", orphans)
	}
}

// TestReplicaWaitsForTheStream: a server whose delta log connection goes
// through a loopback proxy. Cut off from NATS, /healthz lists a stream
// wait for the dataset (typed: kind stream, the dataset, the last seq
// applied) and says degraded; reconnected, the wait goes and a row
// posted meanwhile through another connection is applied.
func TestReplicaWaitsForTheStream(t *testing.T) {
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
	dl, err := deltalog.Connect("nats://"+px.Addr(), deltalog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer dl.Close()
	home := t.TempDir()
	srv, err := server.New(server.Options{Home: home, DeltaLog: dl, CompactRows: -1, CompactBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	r := &replica{t: t, home: home, srv: srv, hs: httptest.NewServer(srv.Handler())}
	defer func() { r.hs.Close(); r.srv.Close() }()
	r.put(100)
	if code, body := r.do("POST", "/v1/datasets/px/rows", "text/csv", "series_id,period,value\nA,2026-10-04,1\n"); code != 200 {
		t.Fatalf("ingest: %d %s", code, body)
	}
	within(t, 5*time.Second, "no wait while connected", func() bool {
		code, h := r.health()
		return code == 200 && h.Replica != nil && h.Replica.Serving && len(h.Replica.Waits) == 0
	})

	px.Cut()
	var w server.Wait
	took := within(t, 30*time.Second, "a stream wait while cut off", func() bool {
		_, h := r.health()
		for _, x := range h.Replica.Waits {
			if x.Kind == server.WaitStream && x.Dataset == "px" {
				w = x
				return h.State == server.HealthDegraded
			}
		}
		return false
	})
	t.Logf("stream wait after %v: %+v", took, w)
	if w.Applied == 0 || w.Reason == "" {
		t.Fatalf("the stream wait: %+v", w)
	}
	// A row logged by another replica meanwhile.
	other, err := deltalog.Connect(node.ClientURL(), deltalog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	day := time.Date(2026, 10, 5, 0, 0, 0, 0, time.UTC).Unix()
	if _, _, err := other.Append(context.Background(), "px", []format.Record{{Op: format.Upsert, SeriesID: "A", Period: day, Value: 2}}, "other-1"); err != nil {
		t.Fatal(err)
	}
	px.Resume()
	within(t, 30*time.Second, "the wait gone and the other's row applied", func() bool {
		_, h := r.health()
		_, v, err := r.srv.Store().Copy("A", day, day)
		return len(h.Replica.Waits) == 0 && err == nil && len(v) == 1 && v[0] == 2
	})
}
