//go:build !probe

package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/energyscope/energyscope/internal/synth"
	"github.com/energyscope/energyscope/localcache"
	"github.com/energyscope/energyscope/localcache/snapshot"
)

// Quick in-process microbenchmarks on a tiny dataset (2,000 series, 150K
// rows, cached under .data/test). The figures of record come from
// `go run . --scale ...`, which measures in fresh processes.
//
//	go test -bench . -benchtime 2s
//	go test -bench 'Get|Open' -short      # skip DuckDB and the cook

var fx struct {
	once sync.Once
	err  error
	csv  string
	home string
	snap string
	qs   []query
}

func fixture(b *testing.B) {
	b.Helper()
	fx.once.Do(func() {
		dir, err := filepath.Abs(filepath.Join(".data", "test"))
		if err != nil {
			fx.err = err
			return
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			fx.err = err
			return
		}
		fx.csv = filepath.Join(dir, "synth-seed1.csv")
		if _, err := os.Stat(fx.csv); err != nil {
			if _, err := synth.WriteFile(fx.csv, synth.Options{Series: 2000, Rows: 150_000, Seed: 1}); err != nil {
				fx.err = err
				return
			}
		}
		fx.home = filepath.Join(dir, "home")
		if fx.snap, err = currentSnapshot(fx.home); err != nil {
			if _, err := cookCSV(fx.csv, fx.home); err != nil {
				fx.err = err
				return
			}
			if fx.snap, fx.err = currentSnapshot(fx.home); fx.err != nil {
				return
			}
		}
		fx.qs, fx.err = queriesFromSnapshot(fx.snap, 10_000, 1)
	})
	if fx.err != nil {
		b.Fatal(fx.err)
	}
}

func BenchmarkOpen(b *testing.B) {
	fixture(b)
	for b.Loop() {
		st, err := localcache.Open(fx.home, &localcache.Options{ReadOnly: true})
		if err != nil {
			b.Fatal(err)
		}
		st.Close()
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/open")
}

func BenchmarkGet(b *testing.B) {
	var r localcache.Result
	defer r.Release()
	fixture(b)
	st, err := localcache.Open(fx.home, &localcache.Options{ReadOnly: true})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	var points int64
	var sum float64
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		q := &fx.qs[i%len(fx.qs)]
		i++
		err := st.GetInto(q.ID, q.From, q.To, &r)
		if err != nil {
			b.Fatal(err)
		}
		sum += sumValues(r.Points.Values) + sumPeriods(r.Points)
		points += int64(r.Points.Len())
		r.Release()
	}
	b.ReportMetric(float64(points)/float64(b.N), "points/op")
}

func BenchmarkGetNoRead(b *testing.B) {
	var r localcache.Result
	defer r.Release()
	fixture(b)
	st, err := localcache.Open(fx.home, &localcache.Options{ReadOnly: true})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		q := &fx.qs[i%len(fx.qs)]
		i++
		err := st.GetInto(q.ID, q.From, q.To, &r)
		if err != nil {
			b.Fatal(err)
		}
		r.Release()
	}
}

func BenchmarkSnapshotLookup(b *testing.B) {
	fixture(b)
	s, err := snapshot.Open(fx.snap)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	i := 0
	for b.Loop() {
		if _, ok := s.Lookup(fx.qs[i%len(fx.qs)].ID); !ok {
			b.Fatal("not found")
		}
		i++
	}
}

func BenchmarkResidentOpen(b *testing.B) {
	fixture(b)
	for b.Loop() {
		res, err := loadResident(fx.snap)
		if err != nil {
			b.Fatal(err)
		}
		res.release()
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/open")
}

func BenchmarkResidentGet(b *testing.B) {
	fixture(b)
	res, err := loadResident(fx.snap)
	if err != nil {
		b.Fatal(err)
	}
	defer res.release()
	i := 0
	var sum float64
	for b.Loop() {
		s, _ := res.get(&fx.qs[i%len(fx.qs)])
		sum += s
		i++
	}
}

func BenchmarkCook(b *testing.B) {
	if testing.Short() {
		b.Skip("-short")
	}
	fixture(b)
	home := b.TempDir()
	var rows int64
	for b.Loop() {
		r, err := cookCSV(fx.csv, home)
		if err != nil {
			b.Fatal(err)
		}
		rows += r.Manifest.Rows
	}
	b.ReportMetric(float64(rows)/b.Elapsed().Seconds(), "rows/s")
}

func BenchmarkDuckDBCook(b *testing.B) {
	if testing.Short() {
		b.Skip("-short")
	}
	fixture(b)
	out := filepath.Join(b.TempDir(), "out.parquet")
	for b.Loop() {
		if _, err := duckCook(fx.csv, out, false); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDuckDBTableQuery(b *testing.B) {
	if testing.Short() {
		b.Skip("-short")
	}
	fixture(b)
	db, err := openDuck()
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(fmt.Sprintf("CREATE TABLE t AS SELECT * FROM %s", readCSVExpr(fx.csv, false))); err != nil {
		b.Fatal(err)
	}
	stmt, err := db.Prepare("SELECT period, value FROM t WHERE series_id = ? AND period BETWEEN CAST(? AS DATE) AND CAST(? AS DATE) ORDER BY period")
	if err != nil {
		b.Fatal(err)
	}
	defer stmt.Close()
	i := 0
	for b.Loop() {
		q := fx.qs[i%len(fx.qs)]
		i++
		if _, err := runDuckQueries(context.Background(), stmt, []query{q}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed())/float64(b.N)/float64(time.Microsecond), "µs/query")
}

// BenchmarkSnapshotGet is BenchmarkGet one layer down (snapshot.Lookup +
// Snapshot.Get, no Store): the difference is the Store's overhead.
func BenchmarkSnapshotGet(b *testing.B) {
	fixture(b)
	s, err := snapshot.Open(fx.snap)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	var sum float64
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		q := &fx.qs[i%len(fx.qs)]
		i++
		row, ok := s.Lookup(q.ID)
		if !ok {
			b.Fatal("not found")
		}
		p, err := s.Get(row, q.From, q.To)
		if err != nil {
			b.Fatal(err)
		}
		sum += sumValues(p.Values) + sumPeriods(p)
	}
}
