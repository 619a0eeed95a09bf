package delta

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/energyscope/energyscope/localcache/format"
)

// liveBase is a fake snapshot: the series ids in row order with their
// frequencies.
type liveBase struct {
	ids   []string
	freqs []format.Frequency
}

func (b *liveBase) Row(id string) (uint32, bool) {
	for i, x := range b.ids {
		if x == id {
			return uint32(i), true
		}
	}
	return 0, false
}
func (b *liveBase) Frequency(row uint32) format.Frequency { return b.freqs[row] }
func (b *liveBase) NumSeries() int                        { return len(b.ids) }

func liveDay(s string) int64 {
	t, err := time.Parse("2006-01-02", s)
	if err != nil {
		panic(err)
	}
	return t.Unix()
}

func TestDeltaApplyRange(t *testing.T) {
	base := &liveBase{ids: make([]string, 70), freqs: make([]format.Frequency, 70)}
	for i := range base.ids {
		base.ids[i], base.freqs[i] = fmt.Sprintf("s%02d", i), format.Daily
	}
	base.ids[65], base.freqs[65] = "M", format.Monthly
	d := New(base, 10)
	if d.LastSeq() != 10 || !d.Empty() {
		t.Fatalf("new delta: last %d empty %v", d.LastSeq(), d.Empty())
	}
	n := d.Apply([]format.Record{
		{Seq: 9, Op: format.Upsert, SeriesID: "s01", Period: liveDay("2026-01-01"), Value: -1}, // covered by the base: skipped
		{Seq: 11, Op: format.Upsert, SeriesID: "s01", Period: liveDay("2026-01-02") + 14*3600, Value: 2},
		{Seq: 12, Op: format.Upsert, SeriesID: "s01", Period: liveDay("2026-01-02") + 23*3600, Value: 3}, // revises the same day
		{Seq: 13, Op: format.Delete, SeriesID: "s01", Period: liveDay("2026-01-01") + 60},
		{Seq: 14, Op: format.Upsert, SeriesID: "M", Period: liveDay("2026-03-17"), Value: 4},
		{Seq: 15, Op: format.Upsert, SeriesID: "new", Period: liveDay("2026-03-17"), Value: 5, Meta: &format.RecordMeta{Name: "n", Frequency: "monthly"}},
		{Seq: 16, Op: format.Upsert, SeriesID: "new", Period: liveDay("2026-04-30") + 3600, Value: 6},
		{Seq: 17, Op: format.Upsert, SeriesID: "plain", Period: liveDay("2026-04-30") + 3600, Value: 7},
		{Seq: 18, Op: format.Upsert, SeriesID: "hourly", Period: liveDay("2026-04-30") + 3601, Value: 8, Meta: &format.RecordMeta{Frequency: "h"}},
	})
	if n != 8 || d.LastSeq() != 18 {
		t.Fatalf("applied %d, last %d", n, d.LastSeq())
	}
	if !d.Touched(1) || !d.Touched(65) || d.Touched(0) || d.Touched(64) || d.Touched(69) {
		t.Fatal("touched bits wrong")
	}
	pts, freq, _, ok := d.Range("s01", liveDay("2026-01-01"), liveDay("2026-01-02"))
	want := []Point{{Period: liveDay("2026-01-01"), Deleted: true}, {Period: liveDay("2026-01-02"), Value: 3}}
	if !ok || freq != format.Daily || fmt.Sprint(pts) != fmt.Sprint(want) {
		t.Fatalf("s01: %v %v %v", pts, freq, ok)
	}
	if pts, _, _, _ := d.Range("s01", liveDay("2026-01-01")+1, liveDay("2026-01-02")-1); len(pts) != 0 {
		t.Fatalf("range between two periods: %v", pts)
	}
	if pts, _, _, _ := d.Range("M", 0, 1<<40); len(pts) != 1 || pts[0].Period != liveDay("2026-03-01") {
		t.Fatalf("monthly base series: %v", pts)
	}
	// A new series takes the frequency its metadata names, in any
	// spelling ParseFrequency accepts.
	pts, freq, meta, _ := d.Range("new", 0, 1<<40)
	if freq != format.Monthly || meta == nil || meta.Name != "n" || len(pts) != 2 || pts[0].Period != liveDay("2026-03-01") || pts[1].Period != liveDay("2026-04-01") {
		t.Fatalf("new: %v %q %+v", pts, freq, meta)
	}
	if pts, freq, _, _ := d.Range("plain", 0, 1<<40); freq != format.Daily || len(pts) != 1 || pts[0].Period != liveDay("2026-04-30") {
		t.Fatalf("plain: %v %q", pts, freq)
	}
	if pts, freq, _, _ := d.Range("hourly", 0, 1<<40); freq != format.Hourly || len(pts) != 1 || pts[0].Period != liveDay("2026-04-30")+3600 {
		t.Fatalf("hourly: %v %q", pts, freq)
	}
	if _, _, _, ok := d.Range("s02", 0, 1<<40); ok {
		t.Fatal("untouched series reported")
	}
	series, rows, records, _ := d.Stats()
	if series != 5 || rows != 7 || records != 8 {
		t.Fatalf("stats: %d series %d rows %d records", series, rows, records)
	}
	if r := d.Records(15); len(r) != 3 || r[0].Seq != 16 {
		t.Fatalf("records after 15: %v", r)
	}
	if ids := d.SeriesIDs(); fmt.Sprint(ids) != "[M hourly new plain s01]" {
		t.Fatalf("ids %v", ids)
	}
	// The compaction copy is deep.
	snap, last := d.Snapshot()
	snap["s01"].Points[0].Value = 99
	if pts, _, _, _ := d.Range("s01", 0, 1<<40); last != 18 || pts[0].Value == 99 {
		t.Fatal("Snapshot aliases the delta")
	}
	// Re-applying is a no-op.
	if n := d.Apply([]format.Record{{Seq: 18, Op: format.Upsert, SeriesID: "s01", Period: 0, Value: 1}}); n != 0 {
		t.Fatalf("re-applied %d", n)
	}
}

// TestDeltaBatchAtomic: a reader of one series sees all of a batch's
// points or none of them.
func TestDeltaBatchAtomic(t *testing.T) {
	base := &liveBase{ids: []string{"A"}, freqs: []format.Frequency{format.Daily}}
	d := New(base, 0)
	const periods = 50
	var stop atomic.Bool
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() {
			for !stop.Load() {
				pts, _, _, ok := d.Range("A", 0, 1<<40)
				if !ok {
					continue
				}
				if len(pts) != periods {
					errs <- fmt.Errorf("saw %d points", len(pts))
					return
				}
				for _, p := range pts {
					if p.Value != pts[0].Value {
						errs <- fmt.Errorf("points of two batches: %v and %v", pts[0].Value, p.Value)
						return
					}
				}
			}
		})
	}
	seq := uint64(0)
	for g := 1; g <= 300; g++ {
		batch := make([]format.Record, periods)
		for i := range batch {
			seq++
			batch[i] = format.Record{Seq: seq, Op: format.Upsert, SeriesID: "A", Period: int64(i)*86400 + int64(g%86400), Value: float64(g)}
		}
		d.Apply(batch)
	}
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestDeltaMatchesModel applies random batches and holds Range against a
// map.
func TestDeltaMatchesModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	base := &liveBase{ids: []string{"D", "M", "W"}, freqs: []format.Frequency{format.Daily, format.Monthly, format.Weekly}}
	d := New(base, 0)
	freqOf := map[string]format.Frequency{"D": format.Daily, "M": format.Monthly, "W": format.Weekly, "H": format.Hourly, "N": format.Daily}
	type key struct {
		id string
		p  int64
	}
	model := map[key]Point{}
	seq := uint64(0)
	for range 400 {
		batch := make([]format.Record, 1+rng.IntN(8))
		for i := range batch {
			seq += 1 + uint64(rng.IntN(2))
			ids := []string{"D", "M", "W", "H", "N"}
			r := format.Record{Seq: seq, Op: format.Upsert, SeriesID: ids[rng.IntN(len(ids))], Period: liveDay("2025-06-01") + rng.Int64N(400*86400), Value: float64(seq)}
			if r.SeriesID == "H" {
				r.Meta = &format.RecordMeta{Frequency: format.Hourly}
				r.Period = liveDay("2025-06-01") + rng.Int64N(200*3600)
			}
			if rng.IntN(5) == 0 {
				r.Op = format.Delete
			}
			batch[i] = r
			p := freqOf[r.SeriesID].Normalize(r.Period)
			model[key{r.SeriesID, p}] = Point{Period: p, Value: r.Value, Deleted: r.Op == format.Delete}
		}
		if err := format.ValidateRecords(batch); err != nil {
			t.Fatal(err)
		}
		d.Apply(batch)
	}
	for id := range freqOf {
		from := liveDay("2025-06-01") + rng.Int64N(400*86400)
		to := from + rng.Int64N(200*86400)
		pts, _, _, _ := d.Range(id, from, to)
		n := 0
		for k, v := range model {
			if k.id == id && k.p >= from && k.p <= to {
				n++
				_ = v
			}
		}
		if len(pts) != n {
			t.Fatalf("%s: %d points, model %d", id, len(pts), n)
		}
		for i, p := range pts {
			if i > 0 && pts[i-1].Period >= p.Period {
				t.Fatalf("%s: periods not strictly increasing", id)
			}
			if m := model[key{id, p.Period}]; m != p {
				t.Fatalf("%s at %d: %+v, model %+v", id, p.Period, p, m)
			}
		}
	}
}
