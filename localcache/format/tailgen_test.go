package format

import (
	"fmt"

	"github.com/energyscope/energyscope/internal/synth"
)

// realisticTable is the synthetic EIA-style set of internal/synth as a
// table: ns series and rows rows from seed (plus hourly series when
// intraday) with synth's frequency mix, heavy-tailed lengths, stale series
// and two-decimal values. The callers' options are constants, so an error
// is a bug in the test: it panics.
func realisticTable(seed uint64, ns int, rows int64, intraday bool) *Table {
	t := &Table{}
	o := synth.Options{Series: ns, Rows: rows, Seed: seed, Intraday: intraday}
	_, err := synth.Each(o, func(s synth.SeriesSpec, periods []int64, values []float64) error {
		i := uint32(len(t.Series))
		t.Series = append(t.Series, SeriesMeta{ID: s.ID, Frequency: Frequency(s.Frequency), Unit: s.Unit, Name: s.Name, Source: s.Source})
		for j, p := range periods {
			t.Append(i, p, values[j])
		}
		return nil
	})
	if err != nil {
		panic(fmt.Sprintf("realisticTable(%d, %d, %d, %v): %v", seed, ns, rows, intraday, err))
	}
	return t
}
