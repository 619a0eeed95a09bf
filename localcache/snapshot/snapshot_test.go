package snapshot_test

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/localcache/snapshot"
)

func at(s string) int64 {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t.Unix()
}

// cook writes tb as a snapshot into a fresh directory and opens it.
func cook(t *testing.T, tb *format.Table) *snapshot.Snapshot {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "snap")
	if _, _, err := format.Write(dir, tb, format.WriteOptions{Dataset: "snap", Created: time.Unix(1e9, 0)}); err != nil {
		t.Fatal(err)
	}
	s, err := snapshot.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func mustLookup(t *testing.T, s *snapshot.Snapshot, id string) uint32 {
	t.Helper()
	row, ok := s.Lookup(id)
	if !ok {
		t.Fatalf("Lookup(%q) failed", id)
	}
	return row
}

// rangeTable has a daily series around the epoch (negative days), a
// monthly one and an empty one; hourly=true adds an hourly series, which
// makes the snapshot a timestamp one.
func rangeTable(hourly bool) *format.Table {
	tb := &format.Table{Series: []format.SeriesMeta{
		{ID: "daily", Frequency: format.Daily},
		{ID: "monthly", Frequency: format.Monthly},
		{ID: "empty", Frequency: format.Daily},
	}}
	for d := -5; d < 5; d++ { // 1969-12-27 .. 1970-01-05
		tb.Append(0, int64(d)*86400, float64(d))
	}
	for m := 1; m <= 12; m++ {
		tb.Append(1, time.Date(2020, time.Month(m), 1, 0, 0, 0, 0, time.UTC).Unix(), float64(m))
	}
	if hourly {
		tb.Series = append(tb.Series, format.SeriesMeta{ID: "hourly", Frequency: format.Hourly})
		for h := 0; h < 48; h++ {
			tb.Append(3, at("2020-03-01T00:00:00Z")+int64(h)*3600, float64(h))
		}
	}
	return tb
}

func TestGetRanges(t *testing.T) {
	const day = 86400
	cases := []struct {
		id       string
		from, to int64
		want     []float64 // values, which encode the periods
	}{
		{"daily", snapshot.MinTime, snapshot.MaxTime, []float64{-5, -4, -3, -2, -1, 0, 1, 2, 3, 4}},
		{"daily", -2 * day, 1 * day, []float64{-2, -1, 0, 1}},
		{"daily", -2*day + 1, day - 1, []float64{-1, 0}}, // bounds inside a day: from rounds up, to down
		{"daily", -2*day - 1, day + 1, []float64{-2, -1, 0, 1}},
		{"daily", -1, 1, []float64{0}},
		{"daily", 1, day - 1, nil}, // no bucket start inside
		{"daily", -day + 1, -1, nil},
		{"daily", snapshot.MinTime, -5 * day, []float64{-5}},
		{"daily", snapshot.MinTime, -5*day - 1, nil},
		{"daily", 4 * day, snapshot.MaxTime, []float64{4}},
		{"daily", 4*day + 1, snapshot.MaxTime, nil},
		{"daily", 3 * day, 2 * day, nil}, // from > to
		{"daily", snapshot.MaxTime, snapshot.MinTime, nil},
		{"daily", 100 * day, 200 * day, nil},
		{"daily", math.MaxInt32 * day, snapshot.MaxTime, nil},
		{"daily", snapshot.MinTime, math.MinInt32 * day, nil},
		{"monthly", at("2020-03-01T00:00:00Z"), at("2020-05-31T23:59:59Z"), []float64{3, 4, 5}},
		{"monthly", at("2020-03-02T00:00:00Z"), at("2020-05-01T00:00:00Z"), []float64{4, 5}},
		{"monthly", at("2020-03-15T00:00:00Z"), at("2020-03-20T00:00:00Z"), nil},
		{"empty", snapshot.MinTime, snapshot.MaxTime, nil},
	}
	for _, hourly := range []bool{false, true} {
		s := cook(t, rangeTable(hourly))
		defer s.Close()
		wantType := format.PeriodDate32
		if hourly {
			wantType = format.PeriodTimestamp
			cases = append(cases,
				struct {
					id       string
					from, to int64
					want     []float64
				}{"hourly", at("2020-03-01T10:00:00Z"), at("2020-03-01T12:00:00Z"), []float64{10, 11, 12}},
				struct {
					id       string
					from, to int64
					want     []float64
				}{"hourly", at("2020-03-01T10:00:01Z"), at("2020-03-01T11:59:59Z"), []float64{11}},
				struct {
					id       string
					from, to int64
					want     []float64
				}{"hourly", at("2020-03-02T23:00:00Z"), snapshot.MaxTime, []float64{47}})
		}
		if s.Manifest.PeriodType != wantType {
			t.Fatalf("period type %q, want %q", s.Manifest.PeriodType, wantType)
		}
		for _, c := range cases {
			p, err := s.Get(mustLookup(t, s, c.id), c.from, c.to)
			if err != nil {
				t.Fatal(err)
			}
			if p.Len() != len(c.want) {
				t.Errorf("%s Get(%d, %d): %d points %v, want %v", c.id, c.from, c.to, p.Len(), p.Values, c.want)
				continue
			}
			for i, v := range c.want {
				if p.Values[i] != v {
					t.Errorf("%s Get(%d, %d)[%d] = %v, want %v", c.id, c.from, c.to, i, p.Values[i], v)
				}
				if p.Unix(i) < c.from || p.Unix(i) > c.to {
					t.Errorf("%s Get(%d, %d): period %d outside the range", c.id, c.from, c.to, p.Unix(i))
				}
			}
			// Exactly one period column, of the snapshot's type.
			if p.Len() > 0 && (p.Secs != nil) != hourly || (p.Days != nil) == (p.Secs != nil) && p.Len() > 0 {
				t.Errorf("%s: Days %v Secs %v in a %s snapshot", c.id, p.Days != nil, p.Secs != nil, wantType)
			}
		}
		if _, err := s.Get(uint32(s.NumSeries()), snapshot.MinTime, snapshot.MaxTime); !errors.Is(err, format.ErrNotFound) {
			t.Errorf("Get of a row past the index: %v, want ErrNotFound", err)
		}
	}
}

func TestLookupAndInfo(t *testing.T) {
	ids := []string{"A", "AB", "ABC", "A.B", "a", "PET.RWTC.D", "Zürich", "東京.電力", "🙂", "with space", "colon:inside", "nul\x00byte", strings.Repeat("long", 100)}
	tb := &format.Table{}
	for i, id := range ids {
		tb.Series = append(tb.Series, format.SeriesMeta{ID: id, Name: "name of " + id, Unit: "u" + id, Source: "src", Frequency: format.Monthly})
		for k := 0; k <= i; k++ {
			tb.Append(uint32(i), time.Date(2000, time.Month(1+k), 15, 0, 0, 0, 0, time.UTC).Unix(), float64(100*i+k))
		}
	}
	s := cook(t, tb)
	defer s.Close()
	if s.NumSeries() != len(ids) {
		t.Fatalf("%d series, want %d", s.NumSeries(), len(ids))
	}
	seen := map[uint32]bool{}
	for i, id := range ids {
		row := mustLookup(t, s, id)
		if seen[row] {
			t.Fatalf("row %d returned twice", row)
		}
		seen[row] = true
		in := s.Info(row)
		want := snapshot.Info{ID: id, Name: "name of " + id, Unit: "u" + id, Source: "src", Frequency: format.Monthly,
			First: at("2000-01-01T00:00:00Z"), Last: time.Date(2000, time.Month(1+i), 1, 0, 0, 0, 0, time.UTC).Unix(),
			Count: i + 1, LatestValue: float64(100*i + i), Tier: format.Hot, Batch: in.Batch, Offset: in.Offset}
		if in != want {
			t.Errorf("Info(%q) = %+v\nwant %+v", id, in, want)
		}
		if s.SeriesID(row) != id {
			t.Errorf("SeriesID(%d) = %q, want %q", row, s.SeriesID(row), id)
		}
	}
	for _, id := range []string{"", "b", "ABCD", "A.", "zürich", "东京.電力", "nul", "with  space", "PET.RWTC.D "} {
		if row, ok := s.Lookup(id); ok {
			t.Errorf("Lookup(%q) found row %d (%q)", id, row, s.SeriesID(row))
		}
	}
}

// mapped reports whether a file under dir is mapped into this process
// (Linux only).
func mapped(t *testing.T, dir string) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Skipf("no /proc/self/maps: %v", err)
	}
	return strings.Contains(string(b), dir)
}

func TestReferenceCounting(t *testing.T) {
	s := cook(t, rangeTable(false))
	var closed atomic.Int32
	s.OnClose(func() { closed.Add(1) })
	if s.Refs() != 1 {
		t.Fatalf("Refs after Open = %d, want 1", s.Refs())
	}
	if runtime.GOOS == "linux" && !mapped(t, s.Dir) {
		t.Fatal("snapshot files are not mapped after Open")
	}
	if !s.TryRef() {
		t.Fatal("TryRef failed on an open snapshot")
	}
	p, err := s.Get(mustLookup(t, s, "daily"), snapshot.MinTime, snapshot.MaxTime)
	if err != nil {
		t.Fatal(err)
	}
	s.Close() // the opener lets go; the reader still holds its reference
	if s.Refs() != 1 || closed.Load() != 0 {
		t.Fatalf("after Close with a reader: refs %d, closed %d", s.Refs(), closed.Load())
	}
	// The points alias the mapping, which must still be there.
	for i := range p.Len() {
		if p.Values[i] != float64(i-5) || p.Unix(i) != int64(i-5)*86400 {
			t.Fatalf("point %d = (%d, %v) after Close", i, p.Unix(i), p.Values[i])
		}
	}
	s.Unref()
	if s.Refs() != 0 || closed.Load() != 1 {
		t.Fatalf("after the last Unref: refs %d, closed %d", s.Refs(), closed.Load())
	}
	if runtime.GOOS == "linux" && mapped(t, s.Dir) {
		t.Fatal("snapshot files are still mapped after the last Unref")
	}
	if s.TryRef() {
		t.Fatal("TryRef succeeded on a released snapshot")
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("Unref without a reference did not panic")
			}
		}()
		s.Unref()
	}()
}

// TestReferenceCountingConcurrent races readers that take references and
// read against the opener's Close, the way the store retires a snapshot:
// readers that saw it before it was retired may still TryRef it, later ones
// do not. No reader may see unmapped memory (that would fault) and OnClose
// runs exactly once, after all of them.
func TestReferenceCountingConcurrent(t *testing.T) {
	for range 5 {
		s := cook(t, rangeTable(true))
		row := mustLookup(t, s, "hourly")
		var closed atomic.Int32
		var active atomic.Int32
		s.OnClose(func() {
			if active.Load() != 0 {
				t.Error("OnClose ran while a reader held a reference")
			}
			closed.Add(1)
		})
		var retired atomic.Bool
		var wg sync.WaitGroup
		start := make(chan struct{})
		for g := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for !retired.Load() {
					if !s.TryRef() {
						return
					}
					active.Add(1)
					p, err := s.Get(row, snapshot.MinTime, snapshot.MaxTime)
					if err != nil || p.Len() != 48 {
						t.Errorf("reader %d: %d points, %v", g, p.Len(), err)
					}
					sum := 0.0
					for _, v := range p.Values {
						sum += v
					}
					if sum != 47*48/2 {
						t.Errorf("reader %d: sum %v", g, sum)
					}
					active.Add(-1)
					s.Unref()
				}
			}()
		}
		close(start)
		time.Sleep(5 * time.Millisecond)
		retired.Store(true)
		s.Close()
		wg.Wait()
		if closed.Load() != 1 || s.Refs() != 0 {
			t.Fatalf("closed %d times, refs %d", closed.Load(), s.Refs())
		}
	}
}

// Info and Search return copies: they stay valid after the mapping goes.
func TestCopiesOutliveTheMapping(t *testing.T) {
	s := cook(t, rangeTable(false))
	in := s.Info(mustLookup(t, s, "monthly"))
	hits := s.Search("month", 5)
	s.Close()
	if in.ID != "monthly" || len(hits) != 1 || hits[0].ID != "monthly" {
		t.Fatalf("Info %+v, Search %+v", in, hits)
	}
}

func TestSearch(t *testing.T) {
	tb := &format.Table{}
	for _, m := range []format.SeriesMeta{
		{ID: "PET.RWTC.D", Name: "Cushing, OK WTI Spot Price FOB, Daily"},
		{ID: "PET.RBRTE.D", Name: "Europe Brent Spot Price FOB, Daily"},
		{ID: "NG.RNGWHHD.D", Name: "Henry Hub Natural Gas Spot Price, Daily"},
		{ID: "WTI", Name: "short id"},
		{ID: "XWTI.FUT", Name: "WTI futures"},
		{ID: "MÜNCHEN.LOAD", Name: "Stromlast München"},
		{ID: "ÉLEC.FR", Name: "Électricité, France"},
	} {
		tb.Series = append(tb.Series, m)
		tb.Append(uint32(len(tb.Series)-1), 0, 1)
	}
	s := cook(t, tb)
	defer s.Close()
	ids := func(ms []snapshot.Match) []string {
		var out []string
		for _, m := range ms {
			out = append(out, m.ID)
		}
		return out
	}
	cases := []struct {
		q     string
		limit int
		want  []string
	}{
		{"wti", 10, []string{"WTI", "XWTI.FUT", "PET.RWTC.D"}}, // exact id, then name prefix, then name word
		{"WTI", 1, []string{"WTI"}},
		{"pet.", 10, []string{"PET.RWTC.D", "PET.RBRTE.D"}}, // id prefix; tie broken by length, then id order
		{"brent", 10, []string{"PET.RBRTE.D"}},
		{"spot daily", 10, []string{"PET.RWTC.D", "PET.RBRTE.D", "NG.RNGWHHD.D"}},
		{"spot gas", 10, []string{"NG.RNGWHHD.D"}},
		{"  ", 10, nil},
		{"nothing", 10, nil},
		{"wti", 0, nil},
		// Case folding is Unicode, like the query's: an exact id with
		// non-ASCII capitals must find itself.
		{"MÜNCHEN.LOAD", 10, []string{"MÜNCHEN.LOAD"}},
		{"münchen", 10, []string{"MÜNCHEN.LOAD"}},
		{"ÉLEC.FR", 10, []string{"ÉLEC.FR"}},
		{"électricité", 10, []string{"ÉLEC.FR"}},
	}
	for _, c := range cases {
		got := ids(s.Search(c.q, c.limit))
		if strings.Join(got, "|") != strings.Join(c.want, "|") {
			t.Errorf("Search(%q, %d) = %q, want %q", c.q, c.limit, got, c.want)
		}
	}
	if m := s.Search("MÜNCHEN.LOAD", 1); len(m) == 1 && m[0].Score <= s.Search("münchen", 1)[0].Score {
		t.Errorf("exact id scored %d, not above a prefix match", m[0].Score)
	}
}
