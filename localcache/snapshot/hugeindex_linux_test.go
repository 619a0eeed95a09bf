//go:build linux

package snapshot_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/localcache/internal/mmap"
	"github.com/energyscope/energyscope/localcache/snapshot"
)

// hugeIndexSnapshot writes a snapshot whose ids are partly too long for
// their record (read from index.arrow), and returns it with its ids in
// row order.
func hugeIndexSnapshot(t *testing.T) (string, []string) {
	t.Helper()
	var ids []string
	dir, _ := writeDaily(t, 3000, 30, 1<<14, func(s int) (id, name string) {
		id = fmt.Sprintf("DS.S%05d", s)
		if s%7 == 0 {
			id += strings.Repeat(".LONG", 10) // 58 bytes: out of its record
		}
		ids = append(ids, id)
		return id, "series " + id
	})
	return dir, ids
}

// TestHugeIndexAnswersLikeTheMapping: a snapshot opened with HugeIndex
// copies index.hash, then serves every lookup from the copy (the
// mapping's pages stay out of the process: they are dropped when the copy
// takes over, and no lookup maps them again) with exactly the answers of
// the same snapshot served from its mapping.
func TestHugeIndexAnswersLikeTheMapping(t *testing.T) {
	defer snapshot.SetHugeIndexBytes(1)()
	dir, ids := hugeIndexSnapshot(t)
	hashPath := filepath.Join(dir, format.HashFile)

	c, err := snapshot.OpenOptions(dir, snapshot.Options{HugeIndex: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.WaitIndexCopy(); err != nil {
		t.Fatalf("WaitIndexCopy: %v", err)
	}
	if c.IndexCopy() != snapshot.IndexCopied {
		t.Fatal("the copy completed but lookups do not read it")
	}
	type answer struct {
		row    uint32
		ok     bool
		points snapshot.Points
		err    error
	}
	ask := func(s *snapshot.Snapshot) []answer {
		var out []answer
		for i, id := range ids {
			row, ok := s.Lookup(id)
			var a answer
			a.row, a.ok = row, ok
			if ok {
				from, to := int64(i%30)*86400, int64(i%30+5)*86400
				p, err := s.Get(row, from, to)
				a.err = err
				a.points = snapshot.Points{Days: append([]int32(nil), p.Days...), Values: append([]float64(nil), p.Values...)}
			}
			out = append(out, a)
			if _, ok := s.Lookup(id + "X"); ok {
				t.Fatalf("%sX found", id)
			}
		}
		return out
	}
	got := ask(c)
	if kib := residentKiB(t, hashPath); kib != 0 {
		t.Fatalf("index.hash's mapping holds %d KiB after every lookup read the copy", kib)
	}

	m, err := snapshot.OpenOptions(dir, snapshot.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.IndexCopy() != snapshot.IndexMapped || m.WaitIndexCopy() != nil {
		t.Fatal("a snapshot opened without HugeIndex has a copy")
	}
	want := ask(m)
	for i := range want {
		g, w := got[i], want[i]
		if g.row != w.row || g.ok != w.ok || !errors.Is(g.err, w.err) || fmt.Sprint(g.points) != fmt.Sprint(w.points) {
			t.Fatalf("%s: copy gives %+v, mapping %+v", ids[i], g, w)
		}
		if !w.ok || w.row != uint32(i) || w.points.Len() != 5 && w.points.Len() != 6 && i%30 < 25 {
			t.Fatalf("%s: row %d ok %v, %d points", ids[i], w.row, w.ok, w.points.Len())
		}
	}
}

// TestHugeIndexSmallIsMapped: an index.hash under the size is not copied.
func TestHugeIndexSmallIsMapped(t *testing.T) {
	defer snapshot.SetHugeIndexBytes(1 << 40)()
	dir, ids := hugeIndexSnapshot(t)
	s, err := snapshot.OpenOptions(dir, snapshot.Options{HugeIndex: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.WaitIndexCopy(); err != nil || s.IndexCopy() != snapshot.IndexMapped {
		t.Fatalf("index %v, err %v", s.IndexCopy(), err)
	}
	if _, ok := s.Lookup(ids[0]); !ok {
		t.Fatal("lookup failed")
	}
}

// TestHugeIndexRefusesADamagedCopy: a record damaged on disk (the open
// does not checksum the tables: that is proportional to the data) fails
// the copy's check against the header's checksums; the copy is refused
// with a CorruptionError naming index.hash, and lookups stay on the
// mapping.
func TestHugeIndexRefusesADamagedCopy(t *testing.T) {
	defer snapshot.SetHugeIndexBytes(1)()
	dir, ids := hugeIndexSnapshot(t)
	hashPath := filepath.Join(dir, format.HashFile)
	b, err := os.ReadFile(hashPath)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-1] ^= 0x5A // the last record's last byte
	if err := os.WriteFile(hashPath, b, 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := snapshot.OpenOptions(dir, snapshot.Options{HugeIndex: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	err = s.WaitIndexCopy()
	var ce *format.CorruptionError
	if !errors.As(err, &ce) || ce.File != format.HashFile {
		t.Fatalf("WaitIndexCopy = %v, want a CorruptionError of %s", err, format.HashFile)
	}
	if s.IndexCopy() != snapshot.IndexMapped {
		t.Fatalf("a refused copy: index %v", s.IndexCopy())
	}
	if row, ok := s.Lookup(ids[1]); !ok || row != 1 {
		t.Fatalf("Lookup(%s) = %d, %v on the mapping", ids[1], row, ok)
	}
}

// TestHugeIndexCloseDuringCopy: a snapshot released while its copy runs
// stops it; nothing hangs or touches released memory (run with -race),
// and WaitIndexCopy says the copy stopped, or that it had completed.
func TestHugeIndexCloseDuringCopy(t *testing.T) {
	defer snapshot.SetHugeIndexBytes(1)()
	dir, ids := hugeIndexSnapshot(t)
	stopped := 0
	for range 20 {
		s, err := snapshot.OpenOptions(dir, snapshot.Options{HugeIndex: true})
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := s.Lookup(ids[2]); !ok {
			t.Fatal("lookup failed")
		}
		s.Close()
		switch err := s.WaitIndexCopy(); {
		case errors.Is(err, mmap.ErrStopped):
			stopped++
		case err != nil:
			t.Fatalf("WaitIndexCopy after Close: %v", err)
		}
		if s.IndexCopy() != snapshot.IndexMapped {
			t.Fatalf("a released snapshot: index %v", s.IndexCopy())
		}
	}
	t.Logf("%d of 20 copies stopped by Close", stopped)
}
