// Package lakecheck proves that another engine reads the lake: DuckDB's
// read_parquet over the data files iceberg-go plans for a vintage returns
// exactly the snapshot's rows. (DuckDB's iceberg extension would be
// downloaded at run time, which cannot happen here; read_parquet over the
// planned files is correct because the lake stays copy-on-write.)
package lakecheck

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	_ "github.com/duckdb/duckdb-go/v2"

	"github.com/apache/iceberg-go/table"

	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/localcache/snapshot"
	"github.com/energyscope/energyscope/server/cook"
	"github.com/energyscope/energyscope/server/cook/samples"
	"github.com/energyscope/energyscope/server/lake"
)

type row struct {
	Series                        string
	Period                        int64
	Value                         float64
	Frequency, Unit, Name, Source string
}

func cookTable(t *testing.T, dataset string) *format.Table {
	t.Helper()
	for _, s := range samples.Sets {
		if s.Dataset != dataset {
			continue
		}
		b, err := samples.FS.ReadFile(s.File)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(t.TempDir(), s.File)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		cb := cook.NewBuilder()
		if _, err := cb.AddFile(p, s.Opts); err != nil {
			t.Fatal(err)
		}
		return cb.Table()
	}
	t.Fatalf("no sample %s", dataset)
	return nil
}

func writeSnapshot(t *testing.T, dataset string, tab *format.Table, scale float64, seq uint64) string {
	t.Helper()
	c := *tab
	c.Value = slices.Clone(tab.Value)
	for i := range c.Value {
		c.Value[i] *= scale
	}
	dir := filepath.Join(t.TempDir(), "snap")
	if _, _, err := format.Write(dir, &c, format.WriteOptions{Dataset: dataset, Epoch: 1, CoversThroughSeq: seq, Created: time.Unix(0, 0)}); err != nil {
		t.Fatal(err)
	}
	return dir
}

// snapshotRows reads a snapshot directory through the serving reader.
func snapshotRows(t *testing.T, dir string) []row {
	t.Helper()
	s, err := snapshot.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var out []row
	for r := uint32(0); r < uint32(s.NumSeries()); r++ {
		info := s.Info(r)
		p, err := s.Get(r, snapshot.MinTime, snapshot.MaxTime)
		if err != nil {
			t.Fatal(err)
		}
		for i := range p.Len() {
			out = append(out, row{info.ID, p.Unix(i), p.Values[i], string(info.Frequency), info.Unit, info.Name, info.Source})
		}
	}
	return out
}

// duckRows reads the data files iceberg-go plans for snapshot id with
// DuckDB's read_parquet, in (series_id, period) order.
func duckRows(t *testing.T, db *sql.DB, tbl *table.Table, id int64) []row {
	t.Helper()
	tasks, err := tbl.Scan(table.WithSnapshotID(id)).PlanFiles(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, task := range tasks {
		if len(task.DeleteFiles) > 0 {
			t.Fatalf("snapshot %d has delete files: read_parquet would be wrong", id)
		}
		p := task.File.FilePath()
		if u, err := url.Parse(p); err == nil && u.Scheme == "file" {
			p = filepath.FromSlash(u.Path)
		}
		files = append(files, "'"+strings.ReplaceAll(p, "'", "''")+"'")
	}
	if len(files) == 0 {
		t.Fatalf("snapshot %d plans no data files", id)
	}
	q := fmt.Sprintf(`SELECT series_id, CAST(epoch(period) AS BIGINT), value, frequency, unit, name, source
		FROM read_parquet([%s]) ORDER BY series_id, period`, strings.Join(files, ","))
	rs, err := db.Query(q)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	var out []row
	for rs.Next() {
		var r row
		if err := rs.Scan(&r.Series, &r.Period, &r.Value, &r.Frequency, &r.Unit, &r.Name, &r.Source); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	if err := rs.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func same(t *testing.T, what string, got, want []row) {
	t.Helper()
	slices.SortFunc(want, func(a, b row) int {
		if c := strings.Compare(a.Series, b.Series); c != 0 {
			return c
		}
		return int(a.Period - b.Period)
	})
	if len(got) != len(want) {
		t.Fatalf("%s: DuckDB read %d rows, the snapshot has %d", what, len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("%s: row %d: DuckDB %+v, snapshot %+v", what, i, got[i], want[i])
		}
	}
}

// TestDuckDBReadsTheLake publishes two vintages of a daily-or-coarser and
// an hourly sample (Publish of a snapshot directory), then a third cooked
// straight into its Puffin file as a server's compaction does
// (PublishCooked), and reads each with DuckDB.
func TestDuckDBReadsTheLake(t *testing.T) {
	ctx := context.Background()
	l, err := lake.Open(ctx, lake.Options{Home: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("SET TimeZone='UTC'"); err != nil {
		t.Fatal(err)
	}
	for _, ds := range []string{"stocks", "seattle"} {
		tab := cookTable(t, ds)
		dir1 := writeSnapshot(t, ds, tab, 1, 1)
		dir2 := writeSnapshot(t, ds, tab, 3, 2)
		v1, err := l.Publish(ctx, ds, dir1)
		if err != nil {
			t.Fatal(err)
		}
		v2, err := l.Publish(ctx, ds, dir2)
		if err != nil {
			t.Fatal(err)
		}
		tbl, err := l.Table(ctx, ds)
		if err != nil {
			t.Fatal(err)
		}
		same(t, ds+" current", duckRows(t, db, tbl, v2.IcebergSnapshot), snapshotRows(t, dir2))
		same(t, ds+" older", duckRows(t, db, tbl, v1.IcebergSnapshot), snapshotRows(t, dir1))

		dir3 := writeSnapshot(t, ds, tab, 5, 3)
		v3, _, err := l.PublishCooked(ctx, ds, func(c *format.Container) (*format.Manifest, error) {
			m, err := format.ReadManifest(dir3)
			if err != nil {
				return nil, err
			}
			sc := *tab
			sc.Value = slices.Clone(tab.Value)
			for i := range sc.Value {
				sc.Value[i] *= 5
			}
			got, _, err := format.WriteInto(c, &sc, format.WriteOptions{Dataset: ds, Epoch: 1, CoversThroughSeq: 3, Created: time.Unix(0, 0)})
			if err == nil && got.SnapshotID != m.SnapshotID {
				err = fmt.Errorf("cooked %s, the directory holds %s", got.SnapshotID, m.SnapshotID)
			}
			return got, err
		}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if tbl, err = l.Table(ctx, ds); err != nil {
			t.Fatal(err)
		}
		same(t, ds+" cooked", duckRows(t, db, tbl, v3.IcebergSnapshot), snapshotRows(t, dir3))
	}
}
