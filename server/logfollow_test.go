package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/energyscope/energyscope/localcache"
	"github.com/energyscope/energyscope/localcache/delta"
	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/server/deltalog"
)

// newFixtureWith is newFixture with options (Home and Tokens are set).
func newFixtureWith(t *testing.T, home string, o Options) *fixture {
	t.Helper()
	tokens, err := LoadTokens(home + "/" + TokensFile)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, home: home}
	if tokens.Empty() {
		if f.read, err = tokens.Add("r", ScopeRead); err != nil {
			t.Fatal(err)
		}
		if f.write, err = tokens.Add("w", ScopeWrite); err != nil {
			t.Fatal(err)
		}
	}
	o.Home, o.Tokens = home, tokens
	if o.CompactRows == 0 {
		o.CompactRows, o.CompactBytes = -1, -1
	}
	if f.srv, err = New(o); err != nil {
		t.Fatal(err)
	}
	f.hs = newTestHTTP(f.srv)
	return f
}

// reopenFixture starts a server on f's home again, with f's tokens.
func reopenFixture(f *fixture, o Options) *fixture {
	f.t.Helper()
	nf := newFixtureWith(f.t, f.home, o)
	nf.read, nf.write = f.read, f.write
	return nf
}

// startLogNode starts a JetStream node outside any home (an external
// log every replica of a test connects to) and returns a connector.
func startLogNode(t *testing.T, maxPayload int32) func() *deltalog.Log {
	t.Helper()
	n, err := deltalog.StartNode(deltalog.NodeOptions{Dir: t.TempDir(), MaxPayload: maxPayload})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Shutdown)
	return func() *deltalog.Log {
		l, err := deltalog.Connect(n.ClientURL(), deltalog.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(l.Close)
		return l
	}
}

// ingestKey posts CSV rows with an idempotency key ("" sends none).
func (f *fixture) ingestKey(dataset, rows, key string) (int, string) {
	f.t.Helper()
	req, _ := http.NewRequest("POST", f.hs.URL+"/v1/datasets/"+dataset+"/rows", strings.NewReader("series_id,period,value\n"+rows))
	req.Header.Set("Authorization", "Bearer "+f.write)
	req.Header.Set("Content-Type", "text/csv")
	if key != "" {
		req.Header.Set(IdempotencyHeader, key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	b.ReadFrom(resp.Body)
	return resp.StatusCode, b.String()
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func seqsOf(recs []format.Record) []uint64 {
	out := make([]uint64, len(recs))
	for i, r := range recs {
		out[i] = r.Seq
	}
	return out
}

// Two replicas on one delta log: a row ingested through one is applied,
// served and kept for catch-up by the other (the one apply path); a
// retry with the same Idempotency-Key through the other replica stores
// nothing and answers the first seqs; seqs are the log's, contiguous
// across replicas; a bad key is refused.
func TestReplicasShareTheLog(t *testing.T) {
	connect := startLogNode(t, 0)
	a := newFixtureWith(t, t.TempDir(), Options{DeltaLog: connect()})
	defer a.close()
	b := newFixtureWith(t, t.TempDir(), Options{DeltaLog: connect()})
	defer b.close()
	a.putStocks()
	b.putStocks()

	code, body := a.ingestKey("stocks", "MSFT,2026-11-01,500.5\n", "order-1")
	if code != 200 || !strings.Contains(body, `"first_seq":1,`) || !strings.Contains(body, `"idempotency_key":"order-1"`) {
		t.Fatalf("ingest on a: %d %s", code, body)
	}
	// Read-your-writes: acknowledged means applied here.
	if _, body := a.do("GET", "/v1/series/MSFT?from=2026-11-01&to=2026-11-30", a.read, "", nil, ""); !strings.Contains(body, "500.5") {
		t.Fatalf("a right after its ingest: %q", body)
	}
	waitUntil(t, "b to apply a's row", func() bool {
		_, body := b.do("GET", "/v1/series/MSFT?from=2026-11-01&to=2026-11-30", b.read, "", nil, "")
		return strings.Contains(body, "500.5")
	})
	// The retry, to the other replica, with another value: nothing stored.
	code, body = b.ingestKey("stocks", "MSFT,2026-11-01,999\n", "order-1")
	if code != 200 || !strings.Contains(body, `"first_seq":1,`) || !strings.Contains(body, `"last_seq":1,`) {
		t.Fatalf("retry on b: %d %s", code, body)
	}
	if h, err := b.srv.DeltaLog().Head(context.Background(), "stocks"); err != nil || h != 1 {
		t.Fatalf("log head after the retry: %d, %v; want 1", h, err)
	}
	code, body = b.ingestKey("stocks", "MSFT,2026-12-01,600\nAAPL,2026-12-01,7\n", "")
	if code != 200 || !strings.Contains(body, `"first_seq":2,`) || !strings.Contains(body, `"last_seq":3,`) || !strings.Contains(body, `"idempotency_key":"es-`) {
		t.Fatalf("ingest on b: %d %s", code, body)
	}
	waitUntil(t, "a to apply b's rows", func() bool {
		seq, _ := a.srv.Store().LastSeq("stocks")
		return seq == 3
	})
	for _, f := range []*fixture{a, b} {
		_, body := f.do("GET", "/v1/series/MSFT?from=2026-11-01&to=2026-12-31", f.read, "", nil, "")
		if body != "period,value\n2026-11-01,500.5\n2026-12-01,600\n" {
			t.Fatalf("%s serves %q", f.home, body)
		}
		recs, ok := f.srv.Since("stocks", 0)
		if got := seqsOf(recs); !ok || fmt.Sprint(got) != "[1 2 3]" {
			t.Fatalf("%s: catch-up from 0: %v %v", f.home, got, ok)
		}
		if ls := f.srv.LogState(); len(ls.Datasets) != 1 || ls.Datasets[0].Applied != 3 || ls.Datasets[0].State != FollowLive || ls.Embedded {
			t.Fatalf("%s: LogState %+v", f.home, ls)
		}
	}
	for _, bad := range []string{"has space", strings.Repeat("k", deltalog.MaxKeyLen+1), "tab\tkey"} {
		if code, body := a.ingestKey("stocks", "MSFT,2026-11-01,1\n", bad); code != 400 {
			t.Fatalf("key %q: %d %s", bad, code, body)
		}
	}
	if _, _, err := a.srv.IngestKey(context.Background(), "stocks", []format.Record{{Op: format.Upsert, SeriesID: "MSFT", Period: 1, Value: 1}}, "é"); !errors.Is(err, ErrBadInput) || !errors.Is(err, ErrBadKey) {
		t.Fatalf("bad key: %v", err)
	}
	if h, _ := a.srv.DeltaLog().Head(context.Background(), "stocks"); h != 3 {
		t.Fatalf("refused keys logged something: head %d", h)
	}
}

// A batch over the delta log's message limit (an external cluster's
// max_payload) is refused whole with 413 naming the limit; nothing is
// logged, and a batch under it goes through.
func TestIngestOverLogLimit(t *testing.T) {
	connect := startLogNode(t, 64<<10)
	f := newFixtureWith(t, t.TempDir(), Options{DeltaLog: connect()})
	defer f.close()
	f.putStocks()
	limit := f.srv.LogState().MaxBatchBytes
	if limit <= 0 || limit >= 64<<10 {
		t.Fatalf("MaxBatchBytes %d on a 64 KiB node", limit)
	}
	var big strings.Builder
	for i := range 3000 {
		fmt.Fprintf(&big, "MSFT,%s,%d\n", time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).AddDate(0, i, 0).Format("2006-01-02"), i)
	}
	code, body := f.ingestKey("stocks", big.String(), "big")
	if code != 413 || !strings.Contains(body, fmt.Sprint(limit)) {
		t.Fatalf("a batch over the limit: %d %s (want 413 naming %d)", code, body, limit)
	}
	if h, _ := f.srv.DeltaLog().Head(context.Background(), "stocks"); h != 0 {
		t.Fatalf("head %d after a refused batch", h)
	}
	if code, body := f.ingestKey("stocks", "MSFT,2026-11-01,1\n", "small"); code != 200 || !strings.Contains(body, `"first_seq":1,`) {
		t.Fatalf("a small batch: %d %s", code, body)
	}
}

// A restart rebuilds the store's delta and the catch-up tail from the log
// (the store keeps no write-ahead log); a compaction trims the log below
// the oldest retained snapshot's covers, and the tail reaches back to it.
func TestRestartReplaysTheLogAndTrims(t *testing.T) {
	home := t.TempDir()
	f := newFixtureWith(t, home, Options{})
	f.putStocks()
	for i := range 3 {
		if code, body := f.ingestKey("stocks", fmt.Sprintf("MSFT,2027-0%d-01,%d\n", i+1, i), ""); code != 200 {
			t.Fatalf("ingest: %d %s", code, body)
		}
	}
	if _, err := f.srv.Compact("stocks"); err != nil { // covers 3
		t.Fatal(err)
	}
	for i := 3; i < 5; i++ {
		f.ingestKey("stocks", fmt.Sprintf("MSFT,2027-0%d-01,%d\n", i+1, i), "")
	}
	if _, err := f.srv.Compact("stocks"); err != nil { // covers 5; keeps 3 and 5
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := f.srv.DeltaLog().Read(ctx, "stocks", 3); !errors.Is(err, deltalog.ErrTrimmed) {
		t.Fatalf("read the log from 3 after the compaction: %v, want ErrTrimmed (trimmed below 4)", err)
	}
	f.ingestKey("stocks", "MSFT,2027-06-01,5\n", "")
	if ents, _ := os.ReadDir(filepath.Join(home, localcache.DatasetsDir, "stocks", localcache.WALDir)); len(ents) != 0 {
		t.Fatalf("the server's store wrote a write-ahead log: %v", ents)
	}
	f.close()

	f = reopenFixture(f, Options{})
	defer f.close()
	if seq, _ := f.srv.Store().LastSeq("stocks"); seq != 6 {
		t.Fatalf("after the restart the store holds through %d, want 6", seq)
	}
	if _, body := f.do("GET", "/v1/series/MSFT?from=2027-06-01&to=2027-06-30", f.read, "", nil, ""); body != "period,value\n2027-06-01,5\n" {
		t.Fatalf("the logged row after the restart: %q", body)
	}
	recs, ok := f.srv.Since("stocks", 3)
	if got := seqsOf(recs); !ok || fmt.Sprint(got) != "[4 5 6]" {
		t.Fatalf("catch-up from 3: %v %v", got, ok)
	}
	if _, ok := f.srv.Since("stocks", 2); ok {
		t.Fatal("catch-up from 2, below the oldest retained snapshot, was served")
	}
	if code, body := f.ingestKey("stocks", "MSFT,2027-07-01,6\n", ""); code != 200 || !strings.Contains(body, `"first_seq":7,`) {
		t.Fatalf("ingest after the restart: %d %s", code, body)
	}
}

// oldHome makes a home as a server before the delta log left it: the
// stocks dataset with records 1..3 compacted (snapshot covers 3, the one
// before kept), 4..5 in the store's write-ahead log, the history log
// holding 1..5 and an orphan 6 (logged, never applied: a crash).
func oldHome(t *testing.T) (old *fixture, rows []format.Record) {
	t.Helper()
	home := t.TempDir()
	f := newFixtureWith(t, home, Options{})
	f.putStocks()
	f.close()
	if err := os.RemoveAll(filepath.Join(home, NatsDir)); err != nil {
		t.Fatal(err)
	}
	st, err := localcache.Open(home, &localcache.Options{CompactRows: -1, CompactBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	hist, _, err := delta.OpenWAL(filepath.Join(home, HistoryDir, "stocks"), false, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		r := format.Record{Seq: uint64(i + 1), Op: format.Upsert, SeriesID: "MSFT", Period: time.Date(2028, time.Month(i+1), 1, 0, 0, 0, 0, time.UTC).Unix(), Value: float64(100 + i)}
		if err := hist.Append([]format.Record{r}); err != nil {
			t.Fatal(err)
		}
		if i == 5 {
			break // the orphan
		}
		rows = append(rows, r)
		if _, err := st.Apply("stocks", []format.Record{r}); err != nil {
			t.Fatal(err)
		}
		if i == 2 {
			if _, err := st.Compact("stocks"); err != nil {
				t.Fatal(err)
			}
		}
	}
	hist.Close()
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	return f, rows
}

// checkMigrated checks a home moved onto the log: the stream holds rows
// once at their seqs (no orphan), the old logs are gone, the store
// serves every row, the tail reaches back to the oldest snapshot, and
// the next ingest follows.
func checkMigrated(t *testing.T, old *fixture, rows []format.Record) {
	t.Helper()
	home := old.home
	f := reopenFixture(old, Options{})
	defer f.close()
	got, err := f.srv.DeltaLog().Read(context.Background(), "stocks", 1)
	if err != nil || fmt.Sprint(seqsOf(got)) != "[1 2 3 4 5]" {
		t.Fatalf("the log after the migration: %v, %v", seqsOf(got), err)
	}
	for i, r := range got {
		if r.Value != rows[i].Value || r.Period != rows[i].Period {
			t.Fatalf("logged %+v, the home had %+v", r, rows[i])
		}
	}
	for _, p := range []string{filepath.Join(home, HistoryDir), filepath.Join(home, localcache.DatasetsDir, "stocks", localcache.WALDir)} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s left after the migration: %v", p, err)
		}
	}
	_, body := f.do("GET", "/v1/series/MSFT?from=2028-01-01&to=2028-12-31", f.read, "", nil, "")
	if body != "period,value\n2028-01-01,100\n2028-02-01,101\n2028-03-01,102\n2028-04-01,103\n2028-05-01,104\n" {
		t.Fatalf("served after the migration: %q", body)
	}
	recs, ok := f.srv.Since("stocks", 0)
	if !ok || fmt.Sprint(seqsOf(recs)) != "[1 2 3 4 5]" {
		t.Fatalf("catch-up from 0 after the migration: %v %v", seqsOf(recs), ok)
	}
	if code, body := f.ingestKey("stocks", "MSFT,2029-01-01,1\n", ""); code != 200 || !strings.Contains(body, `"first_seq":6,`) {
		t.Fatalf("ingest after the migration: %d %s", code, body)
	}
}

// A home from before the delta log moves onto it once, with the same
// seqs (migrateHome).
func TestMigrateHome(t *testing.T) {
	old, rows := oldHome(t)
	checkMigrated(t, old, rows)
}

// A migration that stopped half way (a crash after the stream took
// records 1..2) completes at the next start without logging a record
// twice.
func TestMigrateHomeResumes(t *testing.T) {
	old, rows := oldHome(t)
	n, err := deltalog.StartNode(deltalog.NodeOptions{Dir: filepath.Join(old.home, NatsDir)})
	if err != nil {
		t.Fatal(err)
	}
	l, err := n.Connect(deltalog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := l.Create(ctx, "stocks", deltalog.CreateOptions{After: 0}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := l.Append(ctx, "stocks", rows[:2], "es-migrate-1-2"); err != nil {
		t.Fatal(err)
	}
	l.Close()
	n.Shutdown()
	checkMigrated(t, old, rows)
}

func newTestHTTP(s *Server) *httptest.Server { return httptest.NewServer(s.Handler()) }

// A new epoch installed under a replica whose follower already applied
// records logged above the epoch's covers (written through another
// replica while the replacement was made, or before this replica
// installed another's vintage): those records belong to the new epoch
// and are applied over it, not dropped (the store's in-memory delta
// starts at covers; reapplyAboveLocked).
func TestNewEpochKeepsRecordsAboveItsCovers(t *testing.T) {
	connect := startLogNode(t, 0)
	a := newFixtureWith(t, t.TempDir(), Options{DeltaLog: connect()})
	defer a.close()
	b := newFixtureWith(t, t.TempDir(), Options{DeltaLog: connect()})
	defer b.close()
	a.putStocks()
	b.putStocks()
	for _, row := range []string{"MSFT,2026-11-01,1\n", "MSFT,2026-12-01,2\n", "MSFT,2027-01-01,3\n"} {
		if code, body := a.ingestKey("stocks", row, ""); code != 200 {
			t.Fatalf("ingest: %d %s", code, body)
		}
	}
	waitUntil(t, "b to apply seq 3", func() bool { seq, _ := b.srv.Store().LastSeq("stocks"); return seq == 3 })

	// On b, an epoch covering seq 1 only: seqs 2 and 3 were logged after it.
	tb := &format.Table{Series: []format.SeriesMeta{{ID: "MSFT", Frequency: format.Monthly}}}
	tb.Append(0, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Unix(), 7)
	dir := filepath.Join(t.TempDir(), "snap")
	m, _, err := format.Write(dir, tb, format.WriteOptions{Dataset: "stocks", Epoch: 2, CoversThroughSeq: 1})
	if err != nil {
		t.Fatal(err)
	}
	d, unlock := b.srv.lockOpen("stocks")
	release, err := b.srv.installReplacement("stocks", d, dir, m, 1)
	if err != nil {
		t.Fatal(err)
	}
	release()
	unlock()

	_, body := b.do("GET", "/v1/series/MSFT?from=2026-01-01&to=2027-12-31", b.read, "", nil, "")
	if body != "period,value\n2026-01-01,7\n2026-12-01,2\n2027-01-01,3\n" {
		t.Fatalf("b after the new epoch: %q (want its snapshot and seqs 2..3, not seq 1)", body)
	}
	if code, body := b.ingestKey("stocks", "MSFT,2027-02-01,4\n", ""); code != 200 || !strings.Contains(body, `"first_seq":4,`) {
		t.Fatalf("ingest on b after the new epoch: %d %s", code, body)
	}
	recs, ok := b.srv.Since("stocks", 1)
	if got := seqsOf(recs); !ok || fmt.Sprint(got) != "[2 3 4]" {
		t.Fatalf("b's tail above the new epoch's covers: %v %v", got, ok)
	}
}

// A delta log that does not answer at start (an external cluster down)
// holds New for at most LogWait per dataset: the dataset is reported
// damaged and serves its snapshot, takes no updates, and once the log
// answers again the heartbeat opens it: the logged rows are replayed and
// ingest continues at the next seq.
func TestLogDownAtStart(t *testing.T) {
	dir := t.TempDir()
	port, err := deltalog.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	node, err := deltalog.StartNode(deltalog.NodeOptions{Dir: dir, Port: port})
	if err != nil {
		t.Fatal(err)
	}
	l, err := deltalog.Connect(node.ClientURL(), deltalog.Options{AttemptTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	f := newFixtureWith(t, t.TempDir(), Options{DeltaLog: l})
	f.putStocks()
	if code, body := f.ingestKey("stocks", "MSFT,2026-11-01,500.5\n", ""); code != 200 {
		t.Fatalf("ingest: %d %s", code, body)
	}
	body, _ := os.ReadFile(stocksCSV)
	for _, name := range []string{"other1", "other2"} {
		if code, resp := f.do("PUT", "/v1/datasets/"+name+"?series_col=symbol&period_col=date&value_col=price&frequency=M", f.write, "text/csv", bytes.NewReader(body), ""); code != 200 {
			t.Fatalf("PUT %s: %d %s", name, code, resp)
		}
	}
	f.close()
	node.Shutdown()

	start := time.Now()
	f = reopenFixture(f, Options{DeltaLog: l, LogWait: time.Second})
	defer f.close()
	// One budget for the three datasets (generous: the machine is shared).
	if took := time.Since(start); took > 30*time.Second {
		t.Fatalf("New took %v with its log down (LogWait 1s)", took)
	}
	if h := healthAny(f); h.Damaged != 3 {
		t.Fatalf("health with the log down: %+v", h)
	}
	if code, _ := f.ingestKey("stocks", "MSFT,2026-12-01,1\n", ""); code == 200 {
		t.Fatal("an ingest was acknowledged with the log down")
	}
	if code, body := f.do("GET", "/v1/series/AAPL?from=2000-01-01&to=2000-01-31", f.read, "", nil, ""); code != 200 || !strings.Contains(body, "2000-01-01") {
		t.Fatalf("the snapshot with the log down: %d %q", code, body)
	}

	node, err = deltalog.StartNode(deltalog.NodeOptions{Dir: dir, Port: port})
	if err != nil {
		t.Fatal(err)
	}
	defer node.Shutdown()
	waitUntil(t, "the datasets to open once their log answers", func() bool { return healthAny(f).Damaged == 0 })
	if seq, err := f.srv.Store().LastSeq("stocks"); err != nil || seq != 1 {
		t.Fatalf("the logged row after the log came back: last seq %d, %v", seq, err)
	}
	if code, body := f.ingestKey("stocks", "MSFT,2026-12-01,1\n", ""); code != 200 || !strings.Contains(body, `"first_seq":2,`) {
		t.Fatalf("ingest after the log came back: %d %s", code, body)
	}
}

// healthAny reads /healthz whether it answers 200 or 503 (a replica that
// waits for a stream answers 503: replica.go).
func healthAny(f *fixture) Health {
	f.t.Helper()
	code, body := f.do("GET", "/healthz", f.read, "", nil, "")
	var h Health
	if err := json.Unmarshal([]byte(body), &h); err != nil || (code != 200 && code != 503) {
		f.t.Fatalf("healthz: %d %s %v", code, body, err)
	}
	return h
}

// An ingest waiting for a follower that does not move kicks it
// (waitApplied), and a kicked follower reads again from its last applied
// seq: nothing lost, nothing twice.
func TestStalledFollowerIsKicked(t *testing.T) {
	d := &dataset{name: "x", appliedCh: make(chan struct{}), kick: make(chan struct{}, 1)}
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		done <- d.waitApplied(ctx, 1)
	}()
	select {
	case <-d.kick:
	case <-time.After(20 * time.Second):
		t.Fatal("a waiting ingest did not kick a follower that did not move")
	}
	d.setApplied(1)
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	connect := startLogNode(t, 0)
	a := newFixtureWith(t, t.TempDir(), Options{DeltaLog: connect()})
	defer a.close()
	b := newFixtureWith(t, t.TempDir(), Options{DeltaLog: connect()})
	defer b.close()
	a.putStocks()
	b.putStocks()
	a.ingestKey("stocks", "MSFT,2026-11-01,1\n", "")
	waitUntil(t, "b to apply seq 1", func() bool { seq, _ := b.srv.Store().LastSeq("stocks"); return seq == 1 })
	bd, err := b.srv.dataset("stocks")
	if err != nil {
		t.Fatal(err)
	}
	bd.kick <- struct{}{}
	waitUntil(t, "b's follower to restart", func() bool { return b.srv.LogState().Datasets[0].Restarts == 1 })
	for _, row := range []string{"MSFT,2026-12-01,2\n", "MSFT,2027-01-01,3\n"} {
		a.ingestKey("stocks", row, "")
	}
	waitUntil(t, "b to apply seq 3", func() bool { seq, _ := b.srv.Store().LastSeq("stocks"); return seq == 3 })
	recs, ok := b.srv.Since("stocks", 0)
	if got := seqsOf(recs); !ok || fmt.Sprint(got) != "[1 2 3]" {
		t.Fatalf("b's tail after the restart: %v %v", got, ok)
	}
}

// An ingest for a dataset this server is installing right now (a PUT, a
// vintage from the lake: its name lock held, not yet open) answers 503
// (retry), not 404.
func TestIngestWhileInstalling(t *testing.T) {
	f := newFixtureWith(t, t.TempDir(), Options{})
	defer f.close()
	unlock := f.srv.lockName("fresh")
	code, body := f.ingestKey("fresh", "MSFT,2026-11-01,1\n", "")
	unlock()
	if code != 503 {
		t.Fatalf("ingest while installing: %d %s, want 503", code, body)
	}
	if code, _ := f.ingestKey("fresh", "MSFT,2026-11-01,1\n", ""); code != 404 {
		t.Fatalf("ingest to an unknown dataset: %d, want 404", code)
	}
}

// A damaged dataset of an old home is not moved into the log, and its
// write-ahead log stays (its rows are not lost while a PUT heals it).
func TestMigrateHomeKeepsDamagedLog(t *testing.T) {
	old, rows := oldHome(t)
	st, err := localcache.Open(old.home, &localcache.Options{CompactRows: -1, CompactBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Apply("stocks", []format.Record{{Seq: 6, Op: format.Upsert, SeriesID: "MSFT", Period: rows[0].Period, Value: 1}}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	dsDir := filepath.Join(old.home, localcache.DatasetsDir, "stocks")
	if err := os.WriteFile(filepath.Join(dsDir, "CURRENT"), []byte("no-such-snapshot\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f := reopenFixture(old, Options{})
	defer f.close()
	if ents, err := os.ReadDir(filepath.Join(dsDir, localcache.WALDir)); err != nil || len(ents) == 0 {
		t.Fatalf("the damaged dataset's write-ahead log was removed: %v %v", ents, err)
	}
}
