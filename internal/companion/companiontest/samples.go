// Package companiontest builds homes for the tests of the companion and
// the desktop app: the real sample data (server/cook/samples) cooked into
// datasets, as `es demo` cooks them. It is imported by tests only.
package companiontest

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/energyscope/energyscope/localcache"
	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/server/cook"
	"github.com/energyscope/energyscope/server/cook/samples"
)

// Sample is one sample file and how it is cooked.
type Sample struct {
	Dataset, File string
	Opts          cook.InputOptions
}

// Samples are the three real samples: annual Iowa electricity (ids
// "Fossil Fuels", ...), monthly stock prices (MSFT, AMZN, IBM, GOOG,
// AAPL) and Seattle hourly normals (SEA.pressure, ...).
var Samples = []Sample{
	{"iowa", "iowa-electricity.csv", cook.InputOptions{SeriesCol: "source", PeriodCol: "year", ValueCol: "net_generation", Unit: "thousand MWh", Source: "U.S. EIA", Frequency: "A"}},
	{"stocks", "stocks.csv", cook.InputOptions{SeriesCol: "symbol", PeriodCol: "date", ValueCol: "price", Unit: "USD", Source: "vega-datasets", Frequency: "M"}},
	{"seattle", "seattle-weather-hourly-normals.csv", cook.InputOptions{Wide: true, PeriodCol: "date", Prefix: "SEA.", Source: "NOAA normals", Frequency: "H"}},
}

// Created is the creation time written into the samples' manifests.
var Created = time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)

// CookSamples cooks every sample into home/datasets (epoch 1). The files
// are read from the embedded copies, so any test directory works.
func CookSamples(tb testing.TB, home string) {
	tb.Helper()
	src := tb.TempDir()
	for _, s := range Samples {
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
	dsDir := filepath.Join(home, localcache.DatasetsDir, dataset)
	tmp, err := format.TempSnapshotDir(dsDir)
	if err != nil {
		tb.Fatal(err)
	}
	m, _, err := format.Write(tmp, b.Table(), format.WriteOptions{Dataset: dataset, Epoch: 1, Created: Created})
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := format.Publish(dsDir, tmp, m); err != nil {
		tb.Fatal(err)
	}
}
