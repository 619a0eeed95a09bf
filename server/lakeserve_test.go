package server

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/energyscope/energyscope/localcache"
	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/server/lake"
)

// lakeFixture is a fixture whose server has the home's embedded lake.
func lakeFixture(t *testing.T, home string, o Options) (*fixture, *lake.Lake) {
	t.Helper()
	l, err := lake.Open(context.Background(), lake.DefaultOptions(home))
	if err != nil {
		t.Fatal(err)
	}
	tokens, err := LoadTokens(home + "/" + TokensFile)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, home: home}
	if f.read, err = tokens.Add("r"+time.Now().Format("150405.000000000"), ScopeRead); err != nil {
		t.Fatal(err)
	}
	if f.write, err = tokens.Add("w"+time.Now().Format("150405.000000000"), ScopeWrite); err != nil {
		t.Fatal(err)
	}
	o.Home, o.Tokens, o.Lake = home, tokens, l
	if o.CompactRows == 0 {
		o.CompactRows, o.CompactBytes = -1, -1
	}
	if f.srv, err = New(o); err != nil {
		l.Close()
		t.Fatal(err)
	}
	f.hs = httptest.NewServer(f.srv.Handler())
	t.Cleanup(func() { l.Close() })
	return f, l
}

func (f *fixture) putStocks() {
	f.t.Helper()
	body, _ := os.ReadFile(stocksCSV)
	if code, resp := f.do("PUT", "/v1/datasets/stocks?series_col=symbol&period_col=date&value_col=price&frequency=M", f.write, "text/csv", bytes.NewReader(body), ""); code != 200 {
		f.t.Fatalf("PUT: %d %s", code, resp)
	}
}

func (f *fixture) health() Health {
	f.t.Helper()
	code, body := f.do("GET", "/healthz", f.read, "", nil, "")
	var h Health
	if err := json.Unmarshal([]byte(body), &h); err != nil || code != 200 {
		f.t.Fatalf("healthz: %d %s %v", code, body, err)
	}
	return h
}

// checkLakeHead: the lake holds n vintages and its head's summary names
// exactly the snapshot the store serves (id, epoch, covered seq).
func checkLakeHead(t *testing.T, l *lake.Lake, st *localcache.Store, dataset string, n int) lake.Vintage {
	t.Helper()
	ctx := context.Background()
	vs, err := l.Vintages(ctx, dataset)
	if err != nil || len(vs) != n {
		t.Fatalf("%d vintages (%v), want %d", len(vs), err, n)
	}
	tbl, err := l.Table(ctx, dataset)
	if err != nil {
		t.Fatal(err)
	}
	sum := tbl.CurrentSnapshot().Summary.Properties
	epoch, id, _, err := st.State(dataset)
	if err != nil {
		t.Fatal(err)
	}
	m := manifestOf(t, st, dataset)
	if sum[lake.SummarySnapshot] != id || sum[lake.SummaryEpoch] != itoa(epoch) || sum[lake.SummaryCoversSeq] != itoa(m.CoversThroughSeq) {
		t.Fatalf("lake head summary %v; the store serves %s epoch %d covers %d", sum, id, epoch, m.CoversThroughSeq)
	}
	return vs[n-1]
}

func manifestOf(t *testing.T, st *localcache.Store, dataset string) format.Manifest {
	t.Helper()
	sts, _ := st.Status()
	for _, d := range sts {
		if d.Name == dataset {
			return d.Manifest
		}
	}
	t.Fatalf("dataset %s not served", dataset)
	return format.Manifest{}
}

func itoa(v uint64) string { return strconv.FormatUint(v, 10) }

// checkServedFromLake: the dataset's snapshot in service is mapped from the
// lake (no directory), the home holds no snapshot directory of it, and
// /v1/files streams each of its files from the mapping, byte for byte.
func checkServedFromLake(t *testing.T, f *fixture, dataset string) {
	t.Helper()
	sts, _ := f.srv.Store().Status()
	for _, d := range sts {
		if d.Name != dataset {
			continue
		}
		if d.Dir != "" {
			t.Fatalf("%s serves from %s, want the lake's mapping", dataset, d.Dir)
		}
		ents, _ := os.ReadDir(filepath.Join(f.srv.Store().DatasetDir(dataset), format.SnapshotsDir))
		for _, e := range ents {
			if !strings.HasPrefix(e.Name(), ".") {
				t.Fatalf("the home keeps snapshot directory %s of %s", e.Name(), dataset)
			}
		}
		for _, fi := range d.Manifest.Files {
			code, body := f.do("GET", "/v1/files/"+dataset+"/"+fi.SHA256, f.read, "", nil, "")
			if sum := sha256.Sum256([]byte(body)); code != 200 || hex.EncodeToString(sum[:]) != fi.SHA256 {
				t.Fatalf("GET /v1/files of %s: %d, %d bytes, sha256 %x", fi.Name, code, len(body), sum)
			}
		}
		return
	}
	t.Fatalf("%s not served", dataset)
}

// checkCookedInPlace: the dataset's current vintage was cooked straight
// into its Puffin file (lake.PublishCooked: the writer's order, the
// manifest last), not copied there from a snapshot directory (the
// manifest first).
func checkCookedInPlace(t *testing.T, l *lake.Lake, dataset string) {
	t.Helper()
	ctx := context.Background()
	v, err := l.Current(ctx, dataset)
	if err != nil {
		t.Fatal(err)
	}
	si, err := l.Artifacts(ctx, dataset, v)
	if err != nil {
		t.Fatal(err)
	}
	mb, ok := si.Blob(format.ManifestFile)
	if !ok {
		t.Fatal("no manifest blob")
	}
	for _, b := range si.Blobs {
		if b.Offset > mb.Offset {
			t.Fatalf("vintage %s: %s lies after the manifest in %s: copied from a snapshot directory, not cooked in place", v.Snapshot, b.File, si.Location)
		}
	}
}

// TestLakePublishesEveryInstall: a PUT, a POST compact and a compaction by
// the size policy each leave exactly one new Iceberg snapshot whose
// summary names what the store serves, each cooked straight into its
// Puffin file; /healthz reports the catalog and the vintage; a restart
// maps what the lake says without a new commit.
func TestLakePublishesEveryInstall(t *testing.T) {
	home := t.TempDir()
	f, l := lakeFixture(t, home, Options{CompactRows: 3})
	f.putStocks()
	checkLakeHead(t, l, f.srv.Store(), "stocks", 1)
	checkServedFromLake(t, f, "stocks")
	checkCookedInPlace(t, l, "stocks")
	f.putStocks() // a replacement of an existing dataset: a new epoch
	checkLakeHead(t, l, f.srv.Store(), "stocks", 2)
	checkServedFromLake(t, f, "stocks")
	checkCookedInPlace(t, l, "stocks")

	// Two rows: under the size policy; POST compact publishes.
	if code, body := f.do("POST", "/v1/datasets/stocks/rows", f.write, "text/csv", strings.NewReader("series_id,period,value\nMSFT,2026-11-01,500.5\nIBM,2026-11-01,1\n"), ""); code != 200 {
		t.Fatalf("ingest: %d %s", code, body)
	}
	if code, body := f.do("POST", "/v1/datasets/stocks/compact", f.write, "", nil, ""); code != 200 {
		t.Fatalf("compact: %d %s", code, body)
	}
	checkLakeHead(t, l, f.srv.Store(), "stocks", 3)
	checkCookedInPlace(t, l, "stocks")

	// Three rows: the size policy compacts in the background.
	if code, body := f.do("POST", "/v1/datasets/stocks/rows", f.write, "text/csv", strings.NewReader("series_id,period,value\nMSFT,2026-12-01,501\nIBM,2026-12-01,2\nAAPL,2026-12-01,3\n"), ""); code != 200 {
		t.Fatalf("ingest: %d %s", code, body)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if vs, _ := l.Vintages(context.Background(), "stocks"); len(vs) == 4 {
			if _, _, seq, _ := f.srv.Store().State("stocks"); manifestOf(t, f.srv.Store(), "stocks").CoversThroughSeq == seq {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the size policy's compaction did not publish within 30 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	v := checkLakeHead(t, l, f.srv.Store(), "stocks", 4)
	checkServedFromLake(t, f, "stocks")
	checkCookedInPlace(t, l, "stocks")

	h := f.health()
	if h.State != HealthOK || h.Lake == nil || h.Lake.Catalog != CatalogReachable || len(h.Datasets) != 1 ||
		h.Datasets[0].Vintage == nil || h.Datasets[0].Vintage.IcebergSnapshot != v.IcebergSnapshot || h.Datasets[0].Vintage.Snapshot != v.Snapshot {
		t.Fatalf("healthz %+v, want the catalog reachable and vintage %d", h, v.IcebergSnapshot)
	}

	// Restart: nothing to publish, the same vintage serves.
	f.close()
	f, l = lakeFixture(t, home, Options{})
	defer f.close()
	checkLakeHead(t, l, f.srv.Store(), "stocks", 4)
	checkServedFromLake(t, f, "stocks")
	if code, body := f.do("GET", "/v1/series/MSFT?from=2026-12-01&to=2026-12-31", f.read, "", nil, ""); code != 200 || body != "period,value\n2026-12-01,501\n" {
		t.Fatalf("after restart: %d %q", code, body)
	}
	if hv := f.health().Datasets[0].Vintage; hv == nil || hv.IcebergSnapshot != v.IcebergSnapshot {
		t.Fatalf("healthz vintage after restart %+v", hv)
	}
}

// TestLakeMigratesPlainHome: a home served without a lake is published
// into the lake once, at the first start with it.
func TestLakeMigratesPlainHome(t *testing.T) {
	home := t.TempDir()
	f := newFixture(t, home)
	f.putStocks()
	if code, body := f.do("POST", "/v1/datasets/stocks/rows", f.write, "text/csv", strings.NewReader("series_id,period,value\nMSFT,2026-11-01,500.5\n"), ""); code != 200 {
		t.Fatalf("ingest: %d %s", code, body)
	}
	f.close()
	f, l := lakeFixture(t, home, Options{})
	checkLakeHead(t, l, f.srv.Store(), "stocks", 1)
	checkServedFromLake(t, f, "stocks")
	// The pending row is still served (in the delta, not yet compacted).
	if code, body := f.do("GET", "/v1/series/MSFT?from=2026-11-01&to=2026-11-30", f.read, "", nil, ""); code != 200 || !strings.Contains(body, "500.5") {
		t.Fatalf("pending row after the migration: %d %q", code, body)
	}
	f.close()
	f, l = lakeFixture(t, home, Options{})
	defer f.close()
	checkLakeHead(t, l, f.srv.Store(), "stocks", 1) // once
	checkServedFromLake(t, f, "stocks")
}

// TestLakeWinsAtStart: a vintage published to the lake while the server
// was down (another server sharing the catalog, a rollback) is what the
// server serves at its next start, with the lake's epoch.
func TestLakeWinsAtStart(t *testing.T) {
	home := t.TempDir()
	f, l := lakeFixture(t, home, Options{})
	f.putStocks()
	f.close()

	tb := &format.Table{Series: []format.SeriesMeta{{ID: "MSFT", Frequency: format.Monthly}, {ID: "NEW", Frequency: format.Monthly}}}
	tb.Append(0, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Unix(), 7)
	tb.Append(1, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Unix(), 8)
	dir := filepath.Join(t.TempDir(), "snap")
	m, _, err := format.Write(dir, tb, format.WriteOptions{Dataset: "stocks", Epoch: 9, CoversThroughSeq: 40})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Publish(context.Background(), "stocks", dir); err != nil {
		t.Fatal(err)
	}

	f, l = lakeFixture(t, home, Options{})
	defer f.close()
	if e, id, seq, _ := f.srv.Store().State("stocks"); id != m.SnapshotID || e != 9 || seq != 40 {
		t.Fatalf("serves %s epoch %d seq %d, want the lake's %s epoch 9 seq 40", id, e, seq, m.SnapshotID)
	}
	checkLakeHead(t, l, f.srv.Store(), "stocks", 2) // installed, not published again
	checkServedFromLake(t, f, "stocks")
	if code, body := f.do("GET", "/v1/series/NEW", f.read, "", nil, ""); code != 200 || body != "period,value\n2026-01-01,8\n" {
		t.Fatalf("NEW: %d %q", code, body)
	}
	// Ingest continues above the lake's covers.
	code, body := f.do("POST", "/v1/datasets/stocks/rows", f.write, "text/csv", strings.NewReader("series_id,period,value\nNEW,2026-02-01,9\n"), "")
	if code != 200 || !strings.Contains(body, `"first_seq":41`) {
		t.Fatalf("ingest after the lake's vintage: %d %s", code, body)
	}
}

// TestLakeForeignHeadRefused: a head another engine appended (no serving
// index) is refused at start with a message naming the table and es cook
// --from-lake; the previous vintage keeps serving, and /healthz says so.
func TestLakeForeignHeadRefused(t *testing.T) {
	home := t.TempDir()
	f, l := lakeFixture(t, home, Options{})
	f.putStocks()
	served := checkLakeHead(t, l, f.srv.Store(), "stocks", 1)
	f.close()
	foreign := foreignAppendStocks(t, l)

	f, l = lakeFixture(t, home, Options{})
	defer f.close()
	if _, id, _, _ := f.srv.Store().State("stocks"); id != served.Snapshot {
		t.Fatalf("serves %s, want the previous vintage %s", id, served.Snapshot)
	}
	if code, body := f.do("GET", "/v1/series/MSFT?from=2000-01-01&to=2000-01-31", f.read, "", nil, ""); code != 200 || body != "period,value\n2000-01-01,39.81\n" {
		t.Fatalf("MSFT: %d %q", code, body)
	}
	hv := f.health().Datasets[0].Vintage
	if hv == nil || hv.IcebergSnapshot != served.IcebergSnapshot || !strings.Contains(hv.Refused, "energyscope.stocks") ||
		!strings.Contains(hv.Refused, "es cook --home HOME --from-lake --dataset stocks") || !strings.Contains(hv.Refused, itoa(uint64(foreign))) {
		t.Fatalf("healthz vintage %+v, want the served vintage and the refusal of %d", hv, foreign)
	}
	if vs, _ := l.Vintages(context.Background(), "stocks"); len(vs) != 2 {
		t.Fatalf("%d vintages: the refusal must not commit", len(vs))
	}
}

// foreignAppendStocks appends one row with iceberg-go directly (no
// serving index), as another engine would, and returns its snapshot id.
func foreignAppendStocks(t *testing.T, l *lake.Lake) int64 {
	t.Helper()
	ctx := context.Background()
	tbl, err := l.Table(ctx, "stocks")
	if err != nil {
		t.Fatal(err)
	}
	str := arrow.BinaryTypes.String
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "series_id", Type: str}, {Name: "period", Type: arrow.FixedWidthTypes.Date32},
		{Name: "value", Type: arrow.PrimitiveTypes.Float64}, {Name: "frequency", Type: str},
		{Name: "unit", Type: str}, {Name: "name", Type: str}, {Name: "source", Type: str},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer b.Release()
	b.Field(0).(*array.StringBuilder).Append("FOREIGN")
	b.Field(1).(*array.Date32Builder).Append(arrow.Date32(20000))
	b.Field(2).(*array.Float64Builder).Append(42)
	for i := 3; i < 7; i++ {
		b.Field(i).(*array.StringBuilder).Append("M")
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	at := array.NewTableFromRecords(sc, []arrow.RecordBatch{rec})
	defer at.Release()
	nt, err := tbl.AppendTable(ctx, at, 1024, nil)
	if err != nil {
		t.Fatal(err)
	}
	return nt.CurrentSnapshot().SnapshotID
}
