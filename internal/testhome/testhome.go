// Package testhome builds homes for tests: the real sample data
// (server/cook/samples) cooked into datasets, as `es demo` cooks them,
// and synthetic tables published as snapshots.
//
// It is imported by tests only (TestImportedByTestsOnly), of packages on
// every level: the store's, the hub's, the sync client's, the functions',
// the companion's and the app's. So it imports only what sits below all of
// them: the format, the store (for its home layout) and the cook; never the
// server, the hub, the sync client or the functions
// (TestNoUpwardImports). A test that needs a running server takes
// internal/testserver.
package testhome

import (
	"encoding/csv"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/energyscope/energyscope/localcache"
	"github.com/energyscope/energyscope/localcache/format"
	_ "github.com/energyscope/energyscope/localcache/format/tailwrite" // format.Write can write a cold tier (tail.parquet)
	"github.com/energyscope/energyscope/server/cook"
	"github.com/energyscope/energyscope/server/cook/samples"
)

// Created is the creation time written into the samples' manifests.
var Created = time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)

// CookSamples cooks every sample set (samples.Sets) into home/datasets (epoch 1). The files
// are read from the embedded copies, so any test directory works.
func CookSamples(tb testing.TB, home string) {
	tb.Helper()
	src := tb.TempDir()
	for _, s := range samples.Sets {
		b, err := samples.FS.ReadFile(s.File)
		if err != nil {
			tb.Fatal(err)
		}
		p := filepath.Join(src, s.File)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			tb.Fatal(err)
		}
		CookFile(tb, home, s.Dataset, p, s.Opts)
	}
}

// CookFile cooks one source file into a new snapshot of dataset in home.
func CookFile(tb testing.TB, home, dataset, path string, o cook.InputOptions) {
	tb.Helper()
	b := cook.NewBuilder()
	if _, err := b.AddFile(path, o); err != nil {
		tb.Fatalf("cook %s: %v", path, err)
	}
	Publish(tb, home, dataset, b.Table(), format.WriteOptions{Epoch: 1, Created: Created})
}

// Publish writes t as a new snapshot of dataset in home the way a cook
// does (temp directory, rename, CURRENT moved last) and returns its
// manifest.
func Publish(tb testing.TB, home, dataset string, t *format.Table, o format.WriteOptions) *format.Manifest {
	tb.Helper()
	dsDir := filepath.Join(home, localcache.DatasetsDir, dataset)
	tmp, err := format.TempSnapshotDir(dsDir)
	if err != nil {
		tb.Fatal(err)
	}
	o.Dataset = dataset
	m, _, err := format.Write(tmp, t, o)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := format.Publish(dsDir, tmp, m); err != nil {
		tb.Fatal(err)
	}
	return m
}

// RandomTable is a table of about rows random daily values (16 bytes a
// row in data.arrow) over 2,000 series S00000..S01999 from 2000-01-01.
func RandomTable(rows int) *format.Table {
	t := &format.Table{}
	const series = 2000
	r := rand.New(rand.NewPCG(1, 2))
	day := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	for s := range series {
		t.Series = append(t.Series, format.SeriesMeta{ID: fmt.Sprintf("S%05d", s), Frequency: format.Daily})
		for i := range rows / series {
			t.Append(uint32(s), day+int64(i)*86400, r.Float64()*1000)
		}
	}
	return t
}

// StockPrices reads the sample stocks.csv into symbol -> month (its
// first day formatted with layout) -> price.
func StockPrices(tb testing.TB, layout string) map[string]map[string]float64 {
	tb.Helper()
	f, err := samples.FS.Open("stocks.csv")
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		tb.Fatal(err)
	}
	out := map[string]map[string]float64{}
	for _, r := range rows[1:] {
		d, err := time.Parse("Jan 2 2006", r[1])
		if err != nil {
			tb.Fatal(err)
		}
		v, err := strconv.ParseFloat(r[2], 64)
		if err != nil {
			tb.Fatal(err)
		}
		if out[r[0]] == nil {
			out[r[0]] = map[string]float64{}
		}
		out[r[0]][d.Format(layout)] = v
	}
	return out
}
