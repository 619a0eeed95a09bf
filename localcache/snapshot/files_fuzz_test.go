package snapshot

import (
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"

	"github.com/energyscope/energyscope/localcache/format"
)

var (
	fuzzPackOnce sync.Once
	fuzzPack     []byte
	fuzzSet      FileSet
	fuzzNames    []string
)

// FuzzOpenFiles: a packed snapshot (the way a lake's Puffin file holds
// one) with a flipped byte, a truncated end, or one region moved or
// resized opens with an error or answers every lookup and Get without a
// fault or a panic.
func FuzzOpenFiles(f *testing.F) {
	f.Add(uint32(0), byte(0), uint8(0), int64(0), int64(0), uint32(0))
	f.Add(uint32(100), byte(0xff), uint8(1), int64(4096), int64(0), uint32(0))
	f.Add(uint32(5000), byte(1), uint8(2), int64(0), int64(-8), uint32(10))
	f.Add(uint32(77), byte(0x80), uint8(3), int64(-1), int64(1), uint32(0))
	f.Fuzz(func(t *testing.T, pos uint32, flip byte, which uint8, dOff, dLen int64, cut uint32) {
		fuzzPackOnce.Do(func() {
			rule, _ := format.ParseTailRule("fraction=0.5")
			tmp, err := os.MkdirTemp("", "fuzz-openfiles-")
			if err != nil {
				t.Fatal(err)
			}
			defer os.RemoveAll(tmp)
			dir := filepath.Join(tmp, "snap")
			if _, _, err := format.Write(dir, genTable(5, 40, 3000, true), format.WriteOptions{Dataset: "t", BatchRows: 500, Tail: rule}); err != nil {
				t.Fatal(err)
			}
			path, set := pack(t, dir, 4096)
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			fuzzPack, fuzzSet = b, set
			for n := range set {
				fuzzNames = append(fuzzNames, n)
			}
			sort.Strings(fuzzNames)
		})
		b := append([]byte(nil), fuzzPack...)
		if len(b) > 0 {
			b[int(pos)%len(b)] ^= flip
			b = b[:len(b)-int(cut)%(len(b)/4+1)]
		}
		path := filepath.Join(t.TempDir(), "pack.bin")
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		set := FileSet{}
		for n, r := range fuzzSet {
			r.Path = path
			set[n] = r
		}
		n := fuzzNames[int(which)%len(fuzzNames)]
		r := set[n]
		r.Offset += dOff % (1 << 20)
		r.Length += dLen % (1 << 20)
		set[n] = r
		s, err := OpenFiles(set, Options{})
		if err != nil {
			return
		}
		defer s.Close()
		for row := uint32(0); row < uint32(s.NumSeries()); row++ {
			in := s.Info(row)
			s.Lookup(in.ID)
			s.Get(row, MinTime, MaxTime)
			s.Get(row, in.First, in.First)
		}
		for _, name := range fuzzNames {
			s.FileBytes(name)
		}
	})
}
