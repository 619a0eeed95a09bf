package server

import (
	"testing"
	"time"

	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/server/cook"
)

// TestFormatVersionEverywhere: a server set to write format version 2
// (es serve --format-version 2, for a fleet with companions of an older
// build) writes it in a re-cook (PUT) and a compaction alike; a server
// left at 0 writes this build's version; one set to a version this build
// does not write does not start.
func TestFormatVersionEverywhere(t *testing.T) {
	for _, tc := range []struct{ set, want int }{{2, 2}, {0, format.FormatVersion}} {
		srv, err := New(Options{Home: t.TempDir(), CompactRows: -1, CompactBytes: -1, FormatVersion: tc.set})
		if err != nil {
			t.Fatal(err)
		}
		m, err := srv.Replace("stocks", []string{stocksCSV}, cook.InputOptions{SeriesCol: "symbol", PeriodCol: "date", ValueCol: "price", Frequency: "M"})
		if err != nil {
			t.Fatal(err)
		}
		if m.Version != tc.want {
			t.Errorf("FormatVersion %d: the re-cook wrote version %d, want %d", tc.set, m.Version, tc.want)
		}
		base := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
		if _, _, err := srv.Ingest("stocks", []format.Record{{Op: format.Upsert, SeriesID: "MSFT", Period: base, Value: 1}}); err != nil {
			t.Fatal(err)
		}
		cm, err := srv.Compact("stocks")
		if err != nil {
			t.Fatal(err)
		}
		if cm == nil || cm.Version != tc.want {
			t.Errorf("FormatVersion %d: the compaction wrote %+v, want version %d", tc.set, cm, tc.want)
		}
		srv.Close()
	}
	if _, err := New(Options{Home: t.TempDir(), FormatVersion: format.FormatVersion + 1}); err == nil {
		t.Error("a server set to a format version this build does not write started")
	}
}
