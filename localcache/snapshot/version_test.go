package snapshot

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/energyscope/energyscope/localcache/format"
)

// refGet is Get by the index.arrow columns and the data.arrow batch
// headers (format version 1's lookup path, no hot record): the reference
// the records are checked against.
func refGet(t *testing.T, s *Snapshot, row uint32, from, to int64) Points {
	t.Helper()
	in := s.Info(row)
	if in.Count == 0 || from > to {
		return Points{}
	}
	b, err := s.data.Batch(int(in.Batch))
	if err != nil {
		t.Fatal(err)
	}
	var p Points
	for i := in.Offset; i < in.Offset+uint32(in.Count); i++ {
		var u int64
		if b.Secs != nil {
			u = b.Secs[i]
		} else {
			u = int64(b.Days[i]) * 86400
		}
		if u < from || u > to {
			continue
		}
		if b.Secs != nil {
			p.Secs = append(p.Secs, u)
		} else {
			p.Days = append(p.Days, b.Days[i])
		}
		p.Values = append(p.Values, b.Values[i])
	}
	return p
}

// mustGet is s.Get, failing the test on an error.
func mustGet(t *testing.T, s *Snapshot, row uint32, from, to int64) Points {
	t.Helper()
	p, err := s.Get(row, from, to)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestFormatVersions: a snapshot written as format version 1 (index.hash
// without records: they are built at open), one written as version 2
// (records read in place) and one as version 3 (ids inside the records)
// answer every lookup alike, and like the column
// path of version 1, for both period types and with a cold tier.
func TestFormatVersions(t *testing.T) {
	for _, intraday := range []bool{false, true} {
		for _, tail := range []string{"", "fraction=0.5"} {
			t.Run(fmt.Sprintf("intraday=%v,tail=%q", intraday, tail), func(t *testing.T) {
				tb := genTable(7, 300, 80_000, intraday)
				var rule *format.TailRule
				if tail != "" {
					var err error
					if rule, err = format.ParseTailRule(tail); err != nil {
						t.Fatal(err)
					}
				}
				snaps := map[int]*Snapshot{}
				for _, v := range []int{1, 2, 3} {
					dir := filepath.Join(t.TempDir(), "snap")
					m, _, err := format.Write(dir, tb, format.WriteOptions{Dataset: "t", Created: time.Unix(1, 0), BatchRows: 20_000, Tail: rule, Version: v})
					if err != nil {
						t.Fatal(err)
					}
					if m.Version != v {
						t.Fatalf("wrote version %d, asked for %d", m.Version, v)
					}
					if _, err := format.Verify(dir); err != nil {
						t.Fatalf("version %d: %v", v, err)
					}
					snaps[v] = open(t, dir, Options{})
				}
				v1, v2, v3 := snaps[1], snaps[2], snaps[3]
				if !v1.hot.Load().Built || v2.hot.Load().Built || v3.hot.Load().Built {
					t.Fatalf("records built at open: v1 %v, v2 %v, v3 %v", v1.hot.Load().Built, v2.hot.Load().Built, v3.hot.Load().Built)
				}
				rng := rand.New(rand.NewPCG(3, 3))
				for row := range uint32(v2.NumSeries()) {
					in := v2.Info(row)
					for _, s := range []*Snapshot{v1, v2, v3} {
						if id := s.SeriesID(row); id != in.ID {
							t.Fatalf("SeriesID(%d) = %q, want %q", row, id, in.ID)
						}
						if r, ok := s.Lookup(in.ID); !ok || r != row {
							t.Fatalf("Lookup(%q) = %d, %v; want row %d", in.ID, r, ok, row)
						}
						if f := s.Frequency(row); f != in.Frequency {
							t.Fatalf("%s: frequency %q, index says %q", in.ID, f, in.Frequency)
						}
						for _, miss := range []string{in.ID + "x", in.ID[:len(in.ID)-1], ""} {
							if r, ok := s.Lookup(miss); ok && s.SeriesID(r) != miss {
								t.Fatalf("Lookup(%q) = row %d (%q)", miss, r, s.SeriesID(r))
							}
						}
					}
					for range 4 {
						from, to := randomRange(rng, in)
						a, b := mustGet(t, v1, row, from, to), mustGet(t, v2, row, from, to)
						if !equalPoints(a, b) {
							t.Fatalf("%s [%d, %d]: v1 %d points, v2 %d", in.ID, from, to, a.Len(), b.Len())
						}
						if c := mustGet(t, v3, row, from, to); !equalPoints(a, c) {
							t.Fatalf("%s [%d, %d]: v1 %d points, v3 %d", in.ID, from, to, a.Len(), c.Len())
						}
						if in.Tier == format.Hot {
							if want := refGet(t, v2, row, from, to); !equalPoints(b, want) {
								t.Fatalf("%s [%d, %d]: %d points, the columns give %d", in.ID, from, to, b.Len(), want.Len())
							}
						}
					}
				}
				if _, ok := v2.Lookup("no such series"); ok {
					t.Fatal("found a series that does not exist")
				}
				if _, err := v2.Get(uint32(v2.NumSeries()), MinTime, MaxTime); err != format.ErrNotFound {
					t.Fatalf("Get of row n: %v", err)
				}
			})
		}
	}
}
