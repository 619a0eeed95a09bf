package server

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/energyscope/energyscope/localcache"
	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/localcache/snapshot"
	"github.com/energyscope/energyscope/server/lake"
)

// vintageTable is the rows of vintage i of the test dataset: series A
// daily over 10 days whose values are revised each vintage (day d has
// 100*i + d), series B only from vintage 2 on, series H hourly, and
// day 9 of A appears only from vintage 3 on.
func vintageTable(i int) *format.Table {
	t := &format.Table{Series: []format.SeriesMeta{
		{ID: "A", Name: "a", Unit: "MW", Frequency: format.Daily},
		{ID: "B", Frequency: format.Daily},
		{ID: "H", Frequency: format.Hourly},
	}}
	day0 := time.Date(2026, 9, 1, 0, 0, 0, 0, time.UTC).Unix()
	for d := range 10 {
		if d == 9 && i < 3 {
			continue
		}
		t.Append(0, day0+int64(d)*86400, float64(100*i+d))
	}
	if i >= 2 {
		for d := range 3 {
			t.Append(1, day0+int64(d)*86400, float64(-i))
		}
	}
	for h := range 5 {
		t.Append(2, day0+int64(h)*3600, float64(i)+float64(h)/10)
	}
	return t
}

// publishedVintage is one vintage and the snapshot directory it was
// published from (what the store served while it was current).
type publishedVintage struct {
	v   lake.Vintage
	dir string
}

// publishVintages publishes n vintages of dataset "pet" into a lake in a
// temporary home.
func publishVintages(t testing.TB, n int) (*lake.Lake, []publishedVintage) {
	t.Helper()
	home := t.TempDir()
	l, err := lake.Open(context.Background(), lake.Options{Home: home})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	var out []publishedVintage
	for i := range n {
		dir := filepath.Join(t.TempDir(), "snap")
		if _, _, err := format.Write(dir, vintageTable(i), format.WriteOptions{Dataset: "pet", Epoch: 1, CoversThroughSeq: uint64(10 * i), Created: time.Unix(1790000000, 0)}); err != nil {
			t.Fatal(err)
		}
		v, err := l.Publish(context.Background(), "pet", dir)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, publishedVintage{v, dir})
		time.Sleep(3 * time.Millisecond) // distinct commit times (milliseconds)
	}
	return l, out
}

func newAsOf(t testing.TB, l *lake.Lake, o AsOfOptions) *AsOf {
	t.Helper()
	a, err := NewAsOf(l, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	return a
}

type point struct {
	period int64
	value  float64
}

func pointsOf(p snapshot.Points) []point {
	out := make([]point, p.Len())
	for i := range out {
		out[i] = point{p.Unix(i), p.Values[i]}
	}
	return out
}

// currentPoints is what a read of the snapshot directory gives: what the
// server answered while that vintage was current.
func currentPoints(t *testing.T, dir, id string) []point {
	t.Helper()
	s, err := snapshot.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	row, ok := s.Lookup(id)
	if !ok {
		return nil
	}
	p, err := s.Get(row, snapshot.MinTime, snapshot.MaxTime)
	if err != nil {
		t.Fatal(err)
	}
	return pointsOf(p)
}

func (a *AsOf) points(t *testing.T, v lake.Vintage, id string) ([]point, error) {
	t.Helper()
	var got []point
	err := a.View(context.Background(), "pet", v, id, snapshot.MinTime, snapshot.MaxTime, func(r localcache.Result) error {
		got = pointsOf(r.Points)
		return nil
	})
	return got, err
}

// TestAsOfEqualsWhatWasServed: for every vintage, resolved by es id, by
// its commit time and by a time just after it, the as-of read of every
// series equals the read of the snapshot that was current then.
func TestAsOfEqualsWhatWasServed(t *testing.T) {
	l, pub := publishVintages(t, 6)
	a := newAsOf(t, l, AsOfOptions{})
	ctx := context.Background()
	for i, p := range pub {
		for _, when := range []string{p.v.Snapshot, p.v.CommittedAt.Format(time.RFC3339Nano), p.v.CommittedAt.Add(time.Millisecond / 2).Format(time.RFC3339Nano), strconv.FormatInt(p.v.IcebergSnapshot, 10)} {
			v, err := a.Resolve(ctx, "pet", when)
			if err != nil {
				t.Fatalf("vintage %d, %s: %v", i, when, err)
			}
			if v.IcebergSnapshot != p.v.IcebergSnapshot {
				t.Fatalf("vintage %d: %s resolved to %s, want %s", i, when, v.Snapshot, p.v.Snapshot)
			}
		}
		for _, id := range []string{"A", "B", "H"} {
			want := currentPoints(t, p.dir, id)
			got, err := a.points(t, p.v, id)
			if want == nil {
				if !errors.Is(err, localcache.ErrNotFound) {
					t.Errorf("vintage %d, %s: got %v, want ErrNotFound", i, id, err)
				}
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want) {
				t.Errorf("vintage %d, %s:\n got %v\nwant %v", i, id, got, want)
			}
		}
	}
	// The vintages differ, so the reads above could tell them apart.
	a0, _ := a.points(t, pub[0].v, "A")
	a5, _ := a.points(t, pub[5].v, "A")
	if slices.Equal(a0, a5) {
		t.Fatal("vintages 0 and 5 read the same")
	}
	if st := a.Stats(); st.Open != 6 || st.Misses != 6 {
		t.Errorf("stats %+v: want 6 vintages opened once each", st)
	}
}

// TestResolveAgreesWithTheLake: the cached resolution gives what
// lake.Resolve gives (vintage or typed error) for every kind of WHEN.
func TestResolveAgreesWithTheLake(t *testing.T) {
	l, pub := publishVintages(t, 4)
	ctx := context.Background()
	if err := l.Tag(ctx, "pet", pub[1].v, "october"); err != nil {
		t.Fatal(err)
	}
	a := newAsOf(t, l, AsOfOptions{})
	first := pub[0].v.CommittedAt
	whens := []string{"october", "november", "e9-s9-0123456789ab", "12345", first.Add(-time.Hour).Format(time.RFC3339),
		first.Format(time.DateOnly), first.AddDate(0, 0, -1).Format(time.DateOnly), first.AddDate(0, 0, 1).Format(time.DateOnly),
		first.Add(-time.Millisecond).Format(time.RFC3339Nano), "2026-10-01T00:00:00+02:00"}
	for _, p := range pub {
		whens = append(whens, p.v.Snapshot, p.v.CommittedAt.Format(time.RFC3339Nano), strconv.FormatInt(p.v.IcebergSnapshot, 10))
	}
	for _, w := range whens {
		want, werr := l.Resolve(ctx, "pet", w)
		got, gerr := a.Resolve(ctx, "pet", w)
		switch {
		case werr != nil || gerr != nil:
			for _, sentinel := range []error{lake.ErrUnknownVintage, lake.ErrBeforeFirstVintage} {
				if errors.Is(werr, sentinel) != errors.Is(gerr, sentinel) {
					t.Errorf("%s: lake says %v, as-of %v", w, werr, gerr)
				}
			}
			if (werr == nil) != (gerr == nil) {
				t.Errorf("%s: lake says %v, as-of %v", w, werr, gerr)
			}
		case got.IcebergSnapshot != want.IcebergSnapshot:
			t.Errorf("%s: lake resolves %s, as-of %s", w, want.Snapshot, got.Snapshot)
		}
	}
}

// TestAsOfErrors: every bad request is a typed error and opens nothing.
func TestAsOfErrors(t *testing.T) {
	l, pub := publishVintages(t, 2)
	a := newAsOf(t, l, AsOfOptions{})
	ctx := context.Background()
	for _, tc := range []struct {
		dataset, when string
		want          error
	}{
		{"pet", "", ErrBadWhen},
		{"pet", "2026-13-45", ErrBadWhen},
		{"pet", "2026-10-01Tnope", ErrBadWhen},
		{"pet", "tag\x00", ErrBadWhen},
		{"pet", string(make([]byte, MaxWhen+1)), ErrBadWhen},
		{"pet", "no-such-tag", lake.ErrUnknownVintage},
		{"pet", "e1-s999-0123456789ab", lake.ErrUnknownVintage},
		{"pet", "2001-01-01", lake.ErrBeforeFirstVintage},
		{"gas", "2026-10-01", lake.ErrNoDataset},
	} {
		_, err := a.Resolve(ctx, tc.dataset, tc.when)
		if !errors.Is(err, tc.want) {
			t.Errorf("%q: got %v, want %v", tc.when, err, tc.want)
		}
	}
	if _, err := a.Resolve(ctx, "pet", ""); !errors.Is(err, ErrBadInput) {
		t.Errorf("a bad WHEN is not bad input: %v", err)
	}
	if _, err := a.Resolve(ctx, "pet", "2001-01-01"); err == nil || !strings.Contains(err.Error(), pub[0].v.Snapshot) {
		t.Errorf("before the first vintage: %v does not name it", err)
	}
	if st := a.Stats(); st.Open != 0 || st.Misses != 0 {
		t.Errorf("errors opened vintages: %+v", st)
	}
	if _, err := a.Revisions(ctx, "pet", "NOPE", 0); !errors.Is(err, localcache.ErrNotFound) {
		t.Errorf("revisions of an unknown series: %v", err)
	}
	// The catalog cannot be read (the lake was closed): a cache that has
	// read the list goes on with it, one that has not says the lake is
	// unavailable.
	if _, err := a.Resolve(ctx, "pet", pub[1].v.Snapshot); err != nil {
		t.Fatal(err)
	}
	l.Close()
	a.Invalidate("pet")
	if v, err := a.Resolve(ctx, "pet", pub[1].v.Snapshot); err != nil || v.IcebergSnapshot != pub[1].v.IcebergSnapshot {
		t.Errorf("closed lake, list read before: %+v %v", v, err)
	}
	b := newAsOf(t, l, AsOfOptions{})
	if _, err := b.Resolve(ctx, "pet", pub[1].v.Snapshot); !errors.Is(err, ErrLakeUnavailable) {
		t.Errorf("closed lake: got %v, want ErrLakeUnavailable", err)
	}
}

// TestRevisionsOverVintages: every value one period had, oldest first,
// over 6 vintages, with absent ones marked, periods normalized to the
// series' bucket, and hourly periods read as RFC 3339.
func TestRevisionsOverVintages(t *testing.T) {
	l, pub := publishVintages(t, 6)
	a := newAsOf(t, l, AsOfOptions{})
	ctx := context.Background()
	day := func(d int) int64 { return time.Date(2026, 9, 1+d, 0, 0, 0, 0, time.UTC).Unix() }
	check := func(id string, period int64, want func(i int) (float64, bool)) {
		t.Helper()
		revs, err := a.Revisions(ctx, "pet", id, period)
		if err != nil {
			t.Fatal(err)
		}
		if len(revs) != len(pub) {
			t.Fatalf("%s: %d revisions, want %d", id, len(revs), len(pub))
		}
		for i, r := range revs {
			v, ok := want(i)
			if r.Vintage.IcebergSnapshot != pub[i].v.IcebergSnapshot || r.Present != ok || (ok && r.Value != v) {
				t.Errorf("%s@%d revision %d: %+v, want %v present %v of %s", id, period, i, r, v, ok, pub[i].v.Snapshot)
			}
		}
	}
	check("A", day(4), func(i int) (float64, bool) { return float64(100*i + 4), true })
	check("A", day(9), func(i int) (float64, bool) { return float64(100*i + 9), i >= 3 })
	check("A", day(4)+5*3600, func(i int) (float64, bool) { return float64(100*i + 4), true }) // normalized to the day
	check("B", day(1), func(i int) (float64, bool) { return float64(-i), i >= 2 })
	check("A", day(20), func(i int) (float64, bool) { return 0, false })
	h2, err := ParsePeriod("2026-09-01T02:00:00Z")
	if err != nil {
		t.Fatal(err)
	}
	check("H", h2, func(i int) (float64, bool) { return float64(i) + 0.2, true })
	if _, err := ParsePeriod("yesterday"); !errors.Is(err, ErrBadInput) {
		t.Errorf("bad period: %v", err)
	}
	for _, r := range must(a.Revisions(ctx, "pet", "A", day(0))) {
		if math.IsNaN(r.Value) {
			t.Fatal("NaN")
		}
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestVintageCacheBounds: the cache keeps at most MaxOpen vintages (and
// MaxBytes); an evicted vintage a reader still holds stays mapped and
// readable until the reader lets go, then it is unmapped.
func TestVintageCacheBounds(t *testing.T) {
	l, pub := publishVintages(t, 4)
	a := newAsOf(t, l, AsOfOptions{MaxOpen: 2})
	ctx := context.Background()
	held, err := a.Acquire(ctx, "pet", pub[0].v)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pub[1:] {
		s, err := a.Acquire(ctx, "pet", p.v)
		if err != nil {
			t.Fatal(err)
		}
		s.Unref()
	}
	st := a.Stats()
	if st.Open != 2 || st.Evictions != 2 {
		t.Fatalf("stats %+v: want 2 open, 2 evicted", st)
	}
	// Vintage 0 was evicted while held: still mapped, still right.
	if held.Refs() != 1 {
		t.Fatalf("held vintage has %d refs, want the reader's 1", held.Refs())
	}
	row, ok := held.Lookup("A")
	if !ok {
		t.Fatal("A not in the held vintage")
	}
	p, err := held.Get(row, snapshot.MinTime, snapshot.MaxTime)
	if err != nil || p.Values[4] != 4 {
		t.Fatalf("held vintage reads %v, %v", p.Values, err)
	}
	held.Unref()
	if held.Refs() != 0 {
		t.Fatalf("released vintage has %d refs", held.Refs())
	}
	// Touching it again opens it again.
	if _, err := a.points(t, pub[0].v, "A"); err != nil {
		t.Fatal(err)
	}
	if st := a.Stats(); st.Misses != 5 || st.Open != 2 {
		t.Errorf("stats %+v: want 5 opens, 2 open", st)
	}
	// A byte bound below one vintage keeps just the newest one open.
	b := newAsOf(t, l, AsOfOptions{MaxBytes: 1})
	for _, p := range pub {
		if _, err := b.points(t, p.v, "A"); err != nil {
			t.Fatal(err)
		}
	}
	if st := b.Stats(); st.Open != 1 || st.Evictions != 3 {
		t.Errorf("byte-bounded stats %+v: want 1 open, 3 evicted", st)
	}
}

// TestAsOfConcurrentFirstTouch: many readers touching one vintage at once
// open it once and all read it right.
func TestAsOfConcurrentFirstTouch(t *testing.T) {
	l, pub := publishVintages(t, 2)
	a := newAsOf(t, l, AsOfOptions{})
	errc := make(chan error, 16)
	for range 16 {
		go func() {
			var got []point
			err := a.View(context.Background(), "pet", pub[1].v, "A", snapshot.MinTime, snapshot.MaxTime, func(r localcache.Result) error {
				got = pointsOf(r.Points)
				return nil
			})
			if err == nil && (len(got) != 9 || got[0].value != 100) {
				err = fmt.Errorf("read %v", got)
			}
			errc <- err
		}()
	}
	for range 16 {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	if st := a.Stats(); st.Misses != 1 {
		t.Errorf("stats %+v: want one open", st)
	}
}

// FuzzResolveWhen: any WHEN against a fixed history resolves to one of its
// serving vintages or fails with a typed error (a bad WHEN, an unknown
// vintage, before the first one); it never panics.
func FuzzResolveWhen(f *testing.F) {
	at := time.Date(2026, 10, 1, 9, 0, 0, 0, time.UTC)
	vs := []lake.Vintage{
		{Snapshot: "e1-s0-0123456789ab", IcebergSnapshot: 11, CommittedAt: at, Serving: true, Tags: []string{"october"}},
		{IcebergSnapshot: 12, CommittedAt: at.Add(time.Hour)}, // another engine's commit
		{Snapshot: "e2-s5-0123456789ab", IcebergSnapshot: 13, CommittedAt: at.Add(48 * time.Hour), Serving: true},
	}
	for _, s := range []string{"2026-10-01", "2026-10-01T09:00:00Z", "2026-09-30", "october", "e2-s5-0123456789ab", "12", "13", "2026-02-30", "", "x\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, when string) {
		if err := checkWhen(when); err != nil {
			if !errors.Is(err, ErrBadWhen) || !errors.Is(err, ErrBadInput) {
				t.Fatalf("%q: untyped refusal %v", when, err)
			}
			return
		}
		v, err := resolveIn(vs, "pet", when)
		if err != nil {
			if !errors.Is(err, lake.ErrUnknownVintage) && !errors.Is(err, lake.ErrBeforeFirstVintage) {
				t.Fatalf("%q: untyped error %v", when, err)
			}
			return
		}
		if !slices.ContainsFunc(vs, func(x lake.Vintage) bool { return x.IcebergSnapshot == v.IcebergSnapshot }) {
			t.Fatalf("%q resolved to a vintage not in the history: %+v", when, v)
		}
		if at, ok := lake.ParseWhen(when); ok && (!v.Serving || v.CommittedAt.After(at)) {
			t.Fatalf("%q resolved to %+v", when, v)
		}
	})
}
