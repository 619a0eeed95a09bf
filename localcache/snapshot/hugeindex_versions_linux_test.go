//go:build linux

package snapshot

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/energyscope/energyscope/localcache/format"
)

// TestHugeIndexEveryVersion: over every format version with records in
// index.hash (2 to 5), a snapshot serving from its copy of index.hash
// answers every lookup, frequency and ranged Get as the same snapshot
// over its mapping, both period types, with a cold tier; a version 1
// snapshot (records built at open) is not copied and still answers.
func TestHugeIndexEveryVersion(t *testing.T) {
	defer SetHugeIndexBytes(1)()
	rule, err := format.ParseTailRule("fraction=0.3")
	if err != nil {
		t.Fatal(err)
	}
	for _, intraday := range []bool{false, true} {
		tb := genTable(11, 400, 60_000, intraday)
		for v := 1; v <= format.FormatVersion; v++ {
			t.Run(fmt.Sprintf("intraday=%v/version=%d", intraday, v), func(t *testing.T) {
				dir := filepath.Join(t.TempDir(), "snap")
				if _, _, err := format.Write(dir, tb, format.WriteOptions{Dataset: "t", Created: time.Unix(1, 0), BatchRows: 15_000, Tail: rule, Version: v}); err != nil {
					t.Fatal(err)
				}
				c := open(t, dir, Options{HugeIndex: true})
				m := open(t, dir, Options{})
				if err := c.WaitIndexCopy(); err != nil {
					t.Fatal(err)
				}
				want := IndexCopied
				if v == 1 {
					want = IndexMapped
				}
				if got := c.IndexCopy(); got != want {
					t.Fatalf("index %v, want %v", got, want)
				}
				rng := rand.New(rand.NewPCG(uint64(v), 5))
				for row := range uint32(m.NumSeries()) {
					in := m.Info(row)
					r, ok := c.Lookup(in.ID)
					if !ok || r != row {
						t.Fatalf("Lookup(%q) = %d, %v; want %d", in.ID, r, ok, row)
					}
					if _, ok := c.Lookup(in.ID + "x"); ok {
						t.Fatalf("Lookup(%qx) found", in.ID)
					}
					if f, g := c.Frequency(row), m.Frequency(row); f != g {
						t.Fatalf("%s: frequency %q, mapped %q", in.ID, f, g)
					}
					for range 3 {
						from, to := randomRange(rng, in)
						if a, b := mustGet(t, c, row, from, to), mustGet(t, m, row, from, to); !equalPoints(a, b) {
							t.Fatalf("%s [%d, %d]: %d points from the copy, %d mapped", in.ID, from, to, a.Len(), b.Len())
						}
					}
				}
			})
		}
	}
}

// TestHugeIndexFromARegion: a snapshot opened from regions of one file
// (a lake's Puffin file) at unaligned offsets copies index.hash from its
// region, and the copy answers like the mapping.
func TestHugeIndexFromARegion(t *testing.T) {
	defer SetHugeIndexBytes(1)()
	tb := genTable(13, 300, 40_000, false)
	dir := filepath.Join(t.TempDir(), "snap")
	if _, _, err := format.Write(dir, tb, format.WriteOptions{Dataset: "t", Created: time.Unix(1, 0), BatchRows: 10_000}); err != nil {
		t.Fatal(err)
	}
	_, set := pack(t, dir, 1)
	c, err := OpenFiles(set, Options{HugeIndex: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	m := open(t, dir, Options{})
	if err := c.WaitIndexCopy(); err != nil || c.IndexCopy() != IndexCopied {
		t.Fatalf("index %v, err %v", c.IndexCopy(), err)
	}
	rng := rand.New(rand.NewPCG(13, 1))
	for row := range uint32(m.NumSeries()) {
		in := m.Info(row)
		if r, ok := c.Lookup(in.ID); !ok || r != row {
			t.Fatalf("Lookup(%q) = %d, %v; want %d", in.ID, r, ok, row)
		}
		from, to := randomRange(rng, in)
		if a, b := mustGet(t, c, row, from, to), mustGet(t, m, row, from, to); !equalPoints(a, b) {
			t.Fatalf("%s [%d, %d]: %d points from the copy, %d mapped", in.ID, from, to, a.Len(), b.Len())
		}
	}
}
