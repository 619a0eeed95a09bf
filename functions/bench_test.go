package functions

import (
	"fmt"
	"strconv"
	"testing"
	"time"
)

// synthSource holds n daily series of 30 years each, built once per benchmark.
func synthSource(n int) *memSource {
	m := &memSource{series: map[string]*memSeries{}}
	start := time.Date(1995, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
	const days = 30 * 365
	for i := range n {
		id := "S" + strconv.Itoa(i)
		s := &memSeries{info: SeriesInfo{ID: id, Frequency: "D"}, periods: make([]int64, days), values: make([]float64, days)}
		for d := range days {
			s.periods[d] = start + int64(d)*secondsPerDay
			s.values[d] = float64(i) + float64(d)/100
		}
		m.series[id] = s
		m.ids = append(m.ids, id)
	}
	m.finish()
	return m
}

// BenchmarkGetBatch is the add-in's batch: 1000 calls of ES.Get over one year of a daily
// series each. It reports the cost per call, which includes the Source's copy.
func BenchmarkGetBatch(b *testing.B) {
	// The transforms and calendars against the plain call, in the same run: each pays a
	// second fetch for its look-back before the start.
	for _, opts := range []string{"", "per=M;agg=avg", "headers=y;order=desc",
		"chg=pct", "ma=20", "yoy=pct", "days=weekdays;fill=prev", "fill=prev;chg=diff;rebase=100"} {
		b.Run(fmt.Sprintf("opts=%q", opts), func(b *testing.B) {
			e := &Engine{Src: synthSource(1000), Now: func() time.Time { return testNow }}
			calls := make([][]any, 1000)
			for i := range calls {
				calls[i] = []any{"S" + strconv.Itoa(i), "2020-01-01", "2020-12-31", opts}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				for _, args := range calls {
					if r := e.Eval("ES.Get", args); r.Err != nil {
						b.Fatal(r.Err)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(calls)), "ns/call")
		})
	}
}

// BenchmarkGetMulti aligns 10 daily series over one year.
func BenchmarkGetMulti(b *testing.B) {
	e := &Engine{Src: synthSource(10), Now: func() time.Time { return testNow }}
	args := []any{"S0,S1,S2,S3,S4,S5,S6,S7,S8,S9", "-1Y", "today", "headers=y"}
	b.ReportAllocs()
	for b.Loop() {
		if r := e.Eval("ES.Get", args); r.Err != nil {
			b.Fatal(r.Err)
		}
	}
}

func BenchmarkParseDate(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		for _, s := range []string{"2020-01-01", "2020", "-6M", "today", "2020-01-02T03:04:05Z"} {
			if _, err := ParseDate(s, testNow, true); err != nil {
				b.Fatal(err)
			}
		}
	}
}
