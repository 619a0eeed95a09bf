package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/server/lake"
)

// lakeVintages opens home's embedded lake (beside a running server: the
// SQLite catalog is shared) and lists dataset's vintages.
func lakeVintages(t *testing.T, home, dataset string) []lake.Vintage {
	t.Helper()
	l, err := lake.Open(context.Background(), lake.DefaultOptions(home))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	vs, err := l.Vintages(context.Background(), dataset)
	if err != nil {
		t.Fatal(err)
	}
	return vs
}

func currentOf(t *testing.T, home, dataset string) string {
	t.Helper()
	id, err := format.ReadCurrent(filepath.Join(home, "datasets", dataset))
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// TestServeLakeEndToEnd: a real es serve on a home cooked without a lake
// migrates it into its embedded lake once; a compaction is one more
// commit naming what is served; es cook on the server home publishes;
// another engine's append is cooked from the table by es cook
// --from-lake and served at the next start, with /healthz naming the
// vintage.
func TestServeLakeEndToEnd(t *testing.T) {
	home := t.TempDir()
	mustES(t, "cook", "--home", home, "--dataset", "stocks", "--in", "../../server/cook/samples/stocks.csv",
		"--series-col", "symbol", "--period-col", "date", "--value-col", "price", "--frequency", "M")
	s := newE2EServer(t, home)
	s.start("127.0.0.1:0")
	vs := lakeVintages(t, home, "stocks")
	if len(vs) != 1 || vs[0].Snapshot != s.head("stocks").Snapshot {
		t.Fatalf("after the first start: %+v, want the served snapshot migrated once", vs)
	}
	if _, err := s.post("stocks", []tickRow{{Series: "MSFT", Period: "2026-11-01", Value: 500}}); err != nil {
		t.Fatal(err)
	}
	if code, b, err := s.do("POST", "/v1/datasets/stocks/compact", s.write, "", nil); err != nil || code != 200 {
		t.Fatalf("compact: %d %v %s", code, err, b)
	}
	vs = lakeVintages(t, home, "stocks")
	h := s.head("stocks")
	if len(vs) != 2 || vs[1].Snapshot != h.Snapshot || vs[1].CoversSeq != 1 {
		t.Fatalf("after compact: %+v, serving %+v", vs, h)
	}
	s.p.kill()

	// es cook on the server home publishes first.
	mustES(t, "cook", "--home", home, "--dataset", "stocks", "--in", "../../server/cook/samples/stocks.csv",
		"--series-col", "symbol", "--period-col", "date", "--value-col", "price", "--frequency", "M")
	vs = lakeVintages(t, home, "stocks")
	if len(vs) != 3 || vs[2].Snapshot != currentOf(t, home, "stocks") || vs[2].Epoch != 2 {
		t.Fatalf("after es cook: %+v, CURRENT %s", vs, currentOf(t, home, "stocks"))
	}

	// Another engine appends; es cook --from-lake makes it served.
	l, err := lake.Open(context.Background(), lake.DefaultOptions(home))
	if err != nil {
		t.Fatal(err)
	}
	appendForeign(t, l, "stocks")
	l.Close()
	if code, _, errs := es(t, "cook", "--home", home, "--dataset", "stocks", "--from-lake", "--in", "x.csv"); code != 2 || !strings.Contains(errs, "--from-lake") {
		t.Fatalf("--from-lake with --in: exit %d %q", code, errs)
	}
	mustES(t, "cook", "--home", home, "--dataset", "stocks", "--from-lake")
	vs = lakeVintages(t, home, "stocks")
	if len(vs) != 5 || !vs[4].Serving || vs[4].Snapshot != currentOf(t, home, "stocks") || vs[4].Rows != vs[2].Rows+1 {
		t.Fatalf("after --from-lake: %+v", vs)
	}
	if out := mustES(t, "get", "--home", home, "FOREIGN"); !strings.Contains(out, "42") {
		t.Fatalf("es get FOREIGN: %q", out)
	}
	if out := mustES(t, "get", "--home", home, "MSFT", "2000-01-01", "2000-01-31"); !strings.Contains(out, "39.81") {
		t.Fatalf("es get MSFT: %q", out)
	}

	// es put + es compact on the (stopped) server home publish too.
	rows := filepath.Join(t.TempDir(), "rows.csv")
	if err := os.WriteFile(rows, []byte("series_id,period,value\nMSFT,2026-12-01,601\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	mustES(t, "put", "--home", home, "--dataset", "stocks", rows)
	mustES(t, "compact", "--home", home, "--dataset", "stocks")
	vs = lakeVintages(t, home, "stocks")
	if len(vs) != 6 || vs[5].Snapshot != currentOf(t, home, "stocks") || vs[5].Rows != vs[4].Rows+1 {
		t.Fatalf("after es compact: %+v, CURRENT %s", vs, currentOf(t, home, "stocks"))
	}
	if out := mustES(t, "get", "--home", home, "MSFT", "2026-12-01", "2026-12-31"); !strings.Contains(out, "601") {
		t.Fatalf("es get MSFT after es compact: %q", out)
	}

	// es cook and es compact on a server home leave no copy in the home.
	ents, _ := os.ReadDir(filepath.Join(home, "datasets", "stocks", "snapshots"))
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), ".") {
			t.Fatalf("the server home keeps snapshot directory %s", e.Name())
		}
	}
	// es verify checks the served snapshot where it lives: the lake.
	if out := mustES(t, "verify", "--home", home, "--dataset", "stocks"); !strings.Contains(out, "ok   stocks/"+vs[5].Snapshot+" (lake)") {
		t.Fatalf("es verify of a server home: %q", out)
	}

	s.start(s.addr)
	code, b, err := s.do("GET", "/healthz", s.read, "", nil)
	var hz struct {
		State    string
		Lake     struct{ Catalog string }
		Datasets []struct {
			Name    string
			Vintage struct {
				Snapshot        string
				IcebergSnapshot int64 `json:"iceberg_snapshot"`
			}
		}
	}
	if err != nil || code != 200 || json.Unmarshal(b, &hz) != nil || hz.State != "ok" || hz.Lake.Catalog != "reachable" ||
		len(hz.Datasets) != 1 || hz.Datasets[0].Vintage.IcebergSnapshot != vs[5].IcebergSnapshot {
		t.Fatalf("healthz: %d %v %s", code, err, b)
	}
	if got := lakeVintages(t, home, "stocks"); len(got) != 6 {
		t.Fatalf("a restart committed: %d vintages", len(got))
	}
}

// appendForeign appends one row FOREIGN 2024-10-04 = 42 with iceberg-go
// directly, as another engine would (no serving index).
func appendForeign(t *testing.T, l *lake.Lake, dataset string) {
	t.Helper()
	ctx := context.Background()
	tbl, err := l.Table(ctx, dataset)
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
	b.Field(3).(*array.StringBuilder).Append("D")
	for i := 4; i < 7; i++ {
		b.Field(i).(*array.StringBuilder).Append("")
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	at := array.NewTableFromRecords(sc, []arrow.RecordBatch{rec})
	defer at.Release()
	if _, err := tbl.AppendTable(ctx, at, 1024, nil); err != nil {
		t.Fatal(err)
	}
}
