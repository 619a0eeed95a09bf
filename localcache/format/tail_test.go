package format

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"
)

// readBackTiered is readBack for a snapshot with a cold tier: hot series
// from data.arrow, cold ones from tail.parquet, checking the series column
// of both.
func readBackTiered(t *testing.T, dir string, m *Manifest) (map[string]cookedSeries, map[string]Tier) {
	t.Helper()
	x, err := OpenIndex(aligned(readFile(t, dir, IndexFile)), m.PeriodType, m.Series)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	d, err := OpenData(aligned(readFile(t, dir, DataFile)), m.PeriodType, m.Batches)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var tl *Tail
	if m.File(TailFile) != nil {
		if tl, err = OpenTail(readFile(t, dir, TailFile), m.PeriodType, math.MaxInt64); err != nil {
			t.Fatal(err)
		}
	}
	out := map[string]cookedSeries{}
	tiers := map[string]Tier{}
	for r := uint32(0); r < uint32(x.N); r++ {
		cs := cookedSeries{freq: x.Frequency(r), first: x.First(r), last: x.Last(r), latest: x.Latest[r]}
		tiers[x.ID(r)] = Tier(x.Tier[r])
		if n := x.Length[r]; n > 0 {
			var b *Batch
			var series []uint32
			if Tier(x.Tier[r]) == Cold {
				if b, err = tl.Block(int(x.Batch[r])); err != nil {
					t.Fatal(err)
				}
				if series, err = tl.BlockSeries(int(x.Batch[r])); err != nil {
					t.Fatal(err)
				}
			} else {
				if b, err = d.Batch(int(x.Batch[r])); err != nil {
					t.Fatal(err)
				}
				series = b.Series
			}
			if err := b.Check(x.Offset[r], n); err != nil {
				t.Fatal(err)
			}
			for i := x.Offset[r]; i < x.Offset[r]+n; i++ {
				if series[i] != r {
					t.Fatalf("tier %d row %d of batch %d: series %d, want %d", x.Tier[r], i, x.Batch[r], series[i], r)
				}
				if b.Secs != nil {
					cs.periods = append(cs.periods, b.Secs[i])
				} else {
					cs.periods = append(cs.periods, int64(b.Days[i])*86400)
				}
				cs.values = append(cs.values, b.Values[i])
			}
		}
		out[x.ID(r)] = cs
	}
	return out, tiers
}

// sameSeries compares read-backs; the latest value of a series without
// points is NaN on both sides.
func sameSeries(t *testing.T, got, want map[string]cookedSeries) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d series, want %d", len(got), len(want))
	}
	for id, w := range want {
		g := got[id]
		if math.IsNaN(w.latest) && math.IsNaN(g.latest) {
			g.latest, w.latest = 0, 0
		}
		if !reflect.DeepEqual(g, w) {
			t.Fatalf("%s: read back %+v\nwant %+v", id, g, w)
		}
	}
}

// mixedTable is a realistic table plus a few series without points.
func mixedTable(seed uint64, ns int, rows int64, intraday bool) *Table {
	tb := realisticTable(seed, ns, rows, intraday)
	for i := range 3 {
		tb.Series = append(tb.Series, SeriesMeta{ID: fmt.Sprintf("EMPTY.%d", i), Frequency: Monthly})
	}
	return tb
}

func TestTailRoundTrip(t *testing.T) {
	for _, intraday := range []bool{false, true} {
		t.Run(fmt.Sprint("intraday=", intraday), func(t *testing.T) {
			tb := mixedTable(11, 600, 120_000, intraday)
			allDir, mAll := writeSnap(t, tb, WriteOptions{BatchRows: 5000})
			want := readBack(t, allDir, mAll)

			// Every third series cold, plus one empty series.
			var ids []string
			for i, s := range tb.Series {
				if i%3 == 0 || s.ID == "EMPTY.1" {
					ids = append(ids, s.ID)
				}
			}
			dir, m := writeSnap(t, tb, WriteOptions{BatchRows: 5000, Tail: TailList(ids...)})
			if _, err := Verify(dir); err != nil {
				t.Fatal(err)
			}
			if m.HotSeries != m.Series-len(ids) || m.Rows != mAll.Rows || m.File(TailFile) == nil {
				t.Fatalf("manifest: %d hot of %d series, %d rows (want %d), files %v", m.HotSeries, m.Series, m.Rows, mAll.Rows, m.Files)
			}
			got, tiers := readBackTiered(t, dir, m)
			sameSeries(t, got, want)
			cold := map[string]bool{}
			for _, id := range ids {
				cold[id] = true
			}
			for id, tr := range tiers {
				if (tr == Cold) != cold[id] {
					t.Fatalf("%s: tier %d", id, tr)
				}
			}
			// data.arrow holds only the hot rows, tail.parquet the cold ones.
			tl, err := OpenTail(readFile(t, dir, TailFile), m.PeriodType, math.MaxInt64)
			if err != nil {
				t.Fatal(err)
			}
			var coldRows int64
			for id := range cold {
				coldRows += int64(len(want[id].values))
			}
			if tl.TotalRows != coldRows || tl.NumBlocks < 2 {
				t.Fatalf("tail: %d rows in %d row groups, want %d rows in several", tl.TotalRows, tl.NumBlocks, coldRows)
			}
			for i := range tl.NumBlocks {
				if n := tl.BlockRows(i); n > TailBlockRows && i > 0 {
					// Only a single series longer than the target may exceed it.
					s, _ := tl.BlockSeries(i)
					if s[0] != s[len(s)-1] {
						t.Fatalf("row group %d: %d rows over the target with several series", i, n)
					}
				}
			}
			if st, _ := os.Stat(filepath.Join(dir, DataFile)); st.Size() >= mustSize(t, allDir, DataFile) {
				t.Fatalf("data.arrow did not shrink")
			}
		})
	}
}

func mustSize(t *testing.T, dir, name string) int64 {
	st, err := os.Stat(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

// All series cold: data.arrow has no batches, and everything reads back.
func TestTailAllCold(t *testing.T) {
	tb := mixedTable(12, 50, 3000, false)
	var ids []string
	for _, s := range tb.Series {
		ids = append(ids, s.ID)
	}
	dir, m := writeSnap(t, tb, WriteOptions{Tail: TailList(ids...)})
	if m.HotSeries != 0 || m.Batches != 0 {
		t.Fatalf("hot %d batches %d", m.HotSeries, m.Batches)
	}
	if _, err := Verify(dir); err != nil {
		t.Fatal(err)
	}
	allDir, mAll := writeSnap(t, tb, WriteOptions{})
	got, _ := readBackTiered(t, dir, m)
	sameSeries(t, got, readBack(t, allDir, mAll))
}

// Cold series without points: a tail.parquet without row groups.
func TestTailOnlyEmptyCold(t *testing.T) {
	tb := mixedTable(13, 20, 500, false)
	dir, m := writeSnap(t, tb, WriteOptions{Tail: TailList("EMPTY.0", "EMPTY.2")})
	if m.HotSeries != m.Series-2 {
		t.Fatalf("hot %d of %d", m.HotSeries, m.Series)
	}
	if _, err := Verify(dir); err != nil {
		t.Fatal(err)
	}
	tl, err := OpenTail(readFile(t, dir, TailFile), m.PeriodType, math.MaxInt64)
	if err != nil || tl.NumBlocks != 0 {
		t.Fatalf("tail: %v, %+v", err, tl)
	}
}

// Without cold series the cook is exactly the hot-only format: no
// tail.parquet, and SeriesMeta.Tier is what decides without a rule.
func TestTailFromSeriesMeta(t *testing.T) {
	tb := mixedTable(14, 40, 2000, false)
	_, m := writeSnap(t, tb, WriteOptions{})
	if m.File(TailFile) != nil || m.HotSeries != m.Series || len(m.Files) != 3 {
		t.Fatalf("hot-only cook lists %v", m.Files)
	}
	tb.Series[5].Tier = Cold
	tb.Series[7].Tier = Cold
	dir, m2 := writeSnap(t, tb, WriteOptions{})
	_, tiers := readBackTiered(t, dir, m2)
	if m2.HotSeries != m2.Series-2 || tiers[tb.Series[5].ID] != Cold || tiers[tb.Series[7].ID] != Cold {
		t.Fatalf("tiers from SeriesMeta not kept: hot %d", m2.HotSeries)
	}
	// A rule overrides SeriesMeta.Tier.
	_, m3 := writeSnap(t, tb, WriteOptions{Tail: TailList()})
	if m3.HotSeries != m3.Series {
		t.Fatalf("empty list rule: hot %d of %d", m3.HotSeries, m3.Series)
	}
}

func TestParseTailRule(t *testing.T) {
	list := filepath.Join(t.TempDir(), "ids.txt")
	if err := os.WriteFile(list, []byte("# cold series\nA\n\n  C  \r\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"", "before", "before=", "before=yesterday", "fraction=1.5", "fraction=-0.1", "fraction=x", "fraction=NaN", "list=/does/not/exist", "oldest=3"} {
		if _, err := ParseTailRule(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	r, err := ParseTailRule("list=" + list)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.ids) != 2 {
		t.Fatalf("ids %v", r.ids)
	}
	if _, ok := r.ids["C"]; !ok {
		t.Fatalf("ids %v", r.ids)
	}

	// A..E: last periods 2019-12-31, 2020-01-01, 2019-06-01, (none), 2019-06-01.
	tb := &Table{}
	for _, id := range []string{"E", "D", "C", "B", "A"} {
		tb.Series = append(tb.Series, SeriesMeta{ID: id, Frequency: Daily})
	}
	tb.Append(4, day("2019-12-31"), 1)
	tb.Append(3, day("2020-01-01"), 2)
	tb.Append(2, day("2019-06-01"), 3)
	tb.Append(0, day("2019-06-01"), 5)
	tb.Append(0, day("2010-06-01"), 5)
	cases := []struct {
		rule string
		cold []string
	}{
		{"before=2020-01-01", []string{"A", "C", "E"}},
		{"before=2020-01-01T00:00:01Z", []string{"A", "B", "C", "E"}},
		{"before=1990-01-01", nil},
		{"list=" + list, []string{"A", "C"}},
		{"fraction=0", nil},
		{"fraction=0.5", []string{"C", "E"}},         // 4 series with points: the 2 oldest, C before E by id
		{"fraction=0.25", []string{"C"}},             // tie on 2019-06-01 broken by id
		{"fraction=0.74", []string{"C", "E"}},        // rounded down
		{"fraction=1", []string{"A", "B", "C", "E"}}, // never the empty D
	}
	for _, c := range cases {
		r, err := ParseTailRule(c.rule)
		if err != nil {
			t.Fatal(err)
		}
		dir, m := writeSnap(t, tb, WriteOptions{Tail: r})
		_, tiers := readBackTiered(t, dir, m)
		var got []string
		for id, tr := range tiers {
			if tr == Cold {
				got = append(got, id)
			}
		}
		slices.Sort(got)
		if !slices.Equal(got, c.cold) {
			t.Errorf("%s: cold %v, want %v", c.rule, got, c.cold)
		}
		if _, err := Verify(dir); err != nil {
			t.Errorf("%s: %v", c.rule, err)
		}
	}
}

func TestTailDeterministic(t *testing.T) {
	for _, intraday := range []bool{false, true} {
		tb := mixedTable(15, 300, 50_000, intraday)
		rule, _ := ParseTailRule("fraction=0.6")
		dirA, a := writeSnap(t, tb, WriteOptions{Tail: rule, Created: time.Unix(1, 0)})
		rng := rand.New(rand.NewPCG(3, 3))
		dirB, b := writeSnap(t, shuffled(rng, tb), WriteOptions{Tail: rule, Created: time.Unix(2e9, 0)})
		for _, name := range append(slices.Clone(cookedFiles), TailFile) {
			if !bytes.Equal(readFile(t, dirA, name), readFile(t, dirB, name)) {
				t.Errorf("%s differs between two cooks", name)
			}
		}
		if a.File(TailFile).SHA256 != b.File(TailFile).SHA256 || a.SnapshotID != b.SnapshotID {
			t.Errorf("manifests differ: %s %s", a.SnapshotID, b.SnapshotID)
		}
		// The tail file is part of the content address.
		_, c := writeSnap(t, tb, WriteOptions{Tail: TailList(tb.Series[0].ID)})
		if c.SnapshotID == a.SnapshotID {
			t.Error("different tiers, same snapshot id")
		}
	}
}

func TestVerifyTail(t *testing.T) {
	tb := mixedTable(16, 200, 40_000, false)
	rule, _ := ParseTailRule("fraction=0.5")
	src, m := writeSnap(t, tb, WriteOptions{Tail: rule})
	if _, err := Verify(src); err != nil {
		t.Fatal(err)
	}
	orig := readFile(t, src, TailFile)

	t.Run("flipped byte", func(t *testing.T) {
		rng := rand.New(rand.NewPCG(9, 0))
		dir := copyDir(t, src)
		for _, pos := range []int{0, len(orig) / 2, len(orig) - 1, rng.IntN(len(orig))} {
			b := slices.Clone(orig)
			b[pos] ^= 0x40
			put(t, dir, TailFile, b)
			_, err := Verify(dir)
			wantCorruption(t, err, TailFile)
		}
	})

	// A structurally valid tail.parquet whose series column disagrees with
	// the index, with a manifest that matches the file: only the
	// structural check can catch it.
	rewriteTail := func(t *testing.T, edit func(c *cooked)) string {
		dir := copyDir(t, src)
		c := cookRows(tb, nil)
		ids := make([]string, len(c.order))
		for r, si := range c.order {
			ids[r] = tb.Series[si].ID
		}
		tier, _ := c.tiers(tb, ids, rule)
		cold := c.split(tier)
		cold.batches = cold.cutBatches(TailBlockRows)
		edit(cold)
		os.Remove(filepath.Join(dir, TailFile))
		fi, err := writeTailFile(dirSink(dir), cold)
		if err != nil {
			t.Fatal(err)
		}
		editManifest(t, dir, func(m *Manifest) { *m.File(TailFile) = fi })
		return dir
	}
	t.Run("unchanged rewrite passes", func(t *testing.T) {
		dir := rewriteTail(t, func(*cooked) {})
		if !bytes.Equal(readFile(t, dir, TailFile), orig) {
			t.Fatal("rewrite is not byte-identical")
		}
		if _, err := Verify(dir); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("series column", func(t *testing.T) {
		dir := rewriteTail(t, func(c *cooked) { c.series[len(c.series)/2]++ })
		_, err := Verify(dir)
		wantCorruption(t, err, TailFile)
	})
	t.Run("row groups cut elsewhere", func(t *testing.T) {
		dir := rewriteTail(t, func(c *cooked) { c.batches = c.cutBatches(TailBlockRows / 2) })
		_, err := Verify(dir)
		if err == nil {
			t.Fatal("row groups that disagree with the index passed")
		}
	})
	t.Run("missing rows", func(t *testing.T) {
		dir := rewriteTail(t, func(c *cooked) { c.batches = c.batches[:len(c.batches)-1] })
		if _, err := Verify(dir); err == nil {
			t.Fatal("a tail without its last row group passed")
		}
	})
	t.Run("not listed", func(t *testing.T) {
		dir := copyDir(t, src)
		editManifest(t, dir, func(m *Manifest) {
			m.Files = slices.DeleteFunc(m.Files, func(f FileInfo) bool { return f.Name == TailFile })
		})
		_, err := Verify(dir)
		wantCorruption(t, err, ManifestFile)
	})
	t.Run("hot_series", func(t *testing.T) {
		dir := copyDir(t, src)
		editManifest(t, dir, func(m *Manifest) { m.HotSeries++ })
		if _, err := Verify(dir); err == nil {
			t.Fatal("wrong hot_series passed")
		}
	})
	t.Run("wrong period type", func(t *testing.T) {
		if _, err := OpenTail(orig, PeriodTimestamp, math.MaxInt64); err == nil {
			t.Fatal("date32 tail opened as timestamp")
		}
	})
	t.Run("garbage", func(t *testing.T) {
		for _, b := range [][]byte{nil, []byte("PAR1"), []byte("PAR1\x00\x00\x00\x00PAR1"), orig[:len(orig)/2], readFile(t, src, DataFile)} {
			if _, err := OpenTail(b, m.PeriodType, math.MaxInt64); err == nil {
				t.Fatalf("garbage of %d bytes opened", len(b))
			}
		}
	})
}

func TestTailValuesExact(t *testing.T) {
	// Values that are not round decimals, negative zero, extremes.
	tb := &Table{Series: []SeriesMeta{{ID: "x", Frequency: Daily}, {ID: "y", Frequency: Hourly}}}
	vals := []float64{math.Pi, -0.0, math.MaxFloat64, -math.SmallestNonzeroFloat64, 1e-300, 0.1 + 0.2}
	for i, v := range vals {
		tb.Append(0, day("2000-01-01")+int64(i)*86400, v)
		tb.Append(1, day("1969-12-31")+int64(i)*3600, -v)
	}
	dir, m := writeSnap(t, tb, WriteOptions{Tail: TailList("x", "y")})
	got, _ := readBackTiered(t, dir, m)
	for k, v := range vals {
		if math.Float64bits(got["x"].values[k]) != math.Float64bits(v) || math.Float64bits(got["y"].values[k]) != math.Float64bits(-v) {
			t.Fatalf("value %d: %v %v, want %v", k, got["x"].values[k], got["y"].values[k], v)
		}
	}
	if got["y"].periods[0] != day("1969-12-31") {
		t.Fatalf("negative timestamp: %d", got["y"].periods[0])
	}
}
