package snapshot

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/energyscope/energyscope/localcache/format"
)

// pack concatenates the files of the snapshot in dir into one file, each
// starting at a multiple of align after a gap, the way a lake's Puffin
// file holds them, and returns the file set that locates them.
func pack(t testing.TB, dir string, align int64) (string, FileSet) {
	t.Helper()
	m, err := format.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	names := []string{format.ManifestFile}
	for _, f := range m.Files {
		names = append(names, f.Name)
	}
	var out bytes.Buffer
	out.WriteString("PFA1 some header bytes")
	set := FileSet{}
	path := filepath.Join(t.TempDir(), "pack.bin")
	for _, name := range names {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		for int64(out.Len())%align != 0 {
			out.WriteByte(0xAA)
		}
		set[name] = Region{Path: path, Offset: int64(out.Len()), Length: int64(len(b))}
		out.Write(b)
	}
	out.WriteString("trailing footer")
	if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path, set
}

// TestOpenFilesAnswersLikeTheDirectory: a snapshot opened from regions of
// one file answers every lookup, Info and ranged Get exactly as the same
// snapshot opened from its directory, hot and cold tier, date and
// timestamp periods, at page-aligned and unaligned offsets; FileBytes and
// OpenFile give each file's bytes in both modes.
func TestOpenFilesAnswersLikeTheDirectory(t *testing.T) {
	rule, _ := format.ParseTailRule("fraction=0.5")
	for _, intraday := range []bool{false, true} {
		for _, align := range []int64{4096, 1, 65536} {
			t.Run(fmt.Sprintf("intraday=%v/align=%d", intraday, align), func(t *testing.T) {
				tb := genTable(7, 300, 60_000, intraday)
				dir := cook(t, tb, rule)
				_, set := pack(t, dir, align)
				want := open(t, dir, Options{})
				got, err := OpenFiles(set, Options{})
				if err != nil {
					t.Fatal(err)
				}
				defer got.Close()
				if got.Dir != "" || got.ID() != want.ID() || got.NumSeries() != want.NumSeries() {
					t.Fatalf("Dir %q, id %s/%s, series %d/%d", got.Dir, got.ID(), want.ID(), got.NumSeries(), want.NumSeries())
				}
				if want.tail == nil || got.tail == nil {
					t.Fatal("no cold tier: the test does not cover it")
				}
				rng := rand.New(rand.NewPCG(uint64(align), 3))
				cold := 0
				for row := uint32(0); row < uint32(want.NumSeries()); row++ {
					in := want.Info(row)
					if in.Tier == format.Cold {
						cold++
					}
					gr, ok := got.Lookup(in.ID)
					if !ok || gr != row {
						t.Fatalf("Lookup(%s) = %d %v, want %d", in.ID, gr, ok, row)
					}
					if gi := got.Info(row); gi != in {
						t.Fatalf("Info(%d) = %+v, want %+v", row, gi, in)
					}
					for range 4 {
						from, to := randomRange(rng, in)
						a, errA := want.Get(row, from, to)
						b, errB := got.Get(row, from, to)
						if errA != nil || errB != nil || !equalPoints(a, b) {
							t.Fatalf("Get(%s, %d, %d): %v %v, equal %v", in.ID, from, to, errA, errB, equalPoints(a, b))
						}
					}
				}
				if cold == 0 {
					t.Fatal("no cold series")
				}
				if _, ok := got.Lookup("NO.SUCH.SERIES"); ok {
					t.Fatal("found a series that does not exist")
				}
				for name := range set {
					disk, err := os.ReadFile(filepath.Join(dir, name))
					if err != nil {
						t.Fatal(err)
					}
					for _, s := range []*Snapshot{want, got} {
						b, ok := s.FileBytes(name)
						if !ok || !bytes.Equal(b, disk) {
							t.Fatalf("FileBytes(%s) differs from the file (dir %q)", name, s.Dir)
						}
						r, n, err := s.OpenFile(name)
						if err != nil || n != int64(len(disk)) {
							t.Fatalf("OpenFile(%s): %d %v", name, n, err)
						}
						rb, err := io.ReadAll(io.NewSectionReader(r, 0, n))
						if err != nil || !bytes.Equal(rb, disk) {
							t.Fatalf("OpenFile(%s) reads different bytes: %v", name, err)
						}
					}
				}
				if _, _, err := got.OpenFile("nope.bin"); !errors.Is(err, os.ErrNotExist) {
					t.Fatalf("OpenFile of an unknown name: %v", err)
				}
			})
		}
	}
}

// TestOpenFilesRefusesBadRegions: a file that ends before a region (a
// truncated Puffin file), a region whose length disagrees with the
// manifest, a damaged manifest or header, a set without the manifest, a
// file missing from the set or one the manifest does not list: each is a
// CorruptionError (or the open error), never a fault, and leaks no mapping.
func TestOpenFilesRefusesBadRegions(t *testing.T) {
	rule, _ := format.ParseTailRule("fraction=0.5")
	dir := cook(t, genTable(9, 100, 20_000, false), rule)
	path, set := pack(t, dir, 4096)
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	clone := func() FileSet {
		c := FileSet{}
		for k, v := range set {
			c[k] = v
		}
		return c
	}
	corrupt := func(t *testing.T, err error, file string) {
		t.Helper()
		var ce *format.CorruptionError
		if !errors.As(err, &ce) {
			t.Fatalf("got %v, want a CorruptionError", err)
		}
		if file != "" && ce.File != file {
			t.Fatalf("CorruptionError names %s, want %s (%v)", ce.File, file, err)
		}
	}
	write := func(t *testing.T, b []byte) {
		t.Helper()
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.WriteFile(path, orig, 0o644) })
	}
	for _, name := range []string{format.TailFile, format.DataFile, format.IndexFile} {
		t.Run("truncated inside "+name, func(t *testing.T) {
			r := set[name]
			write(t, orig[:r.Offset+r.Length/2])
			_, err := OpenFiles(set, Options{})
			corrupt(t, err, "")
		})
	}
	t.Run("truncated inside the manifest", func(t *testing.T) {
		r := set[format.ManifestFile]
		write(t, orig[:r.Offset+r.Length-1])
		_, err := OpenFiles(set, Options{})
		corrupt(t, err, format.ManifestFile)
	})
	t.Run("flipped manifest byte", func(t *testing.T) {
		b := bytes.Clone(orig)
		b[set[format.ManifestFile].Offset+20] ^= 0x5a
		write(t, b)
		_, err := OpenFiles(set, Options{})
		corrupt(t, err, format.ManifestFile)
	})
	t.Run("flipped index header", func(t *testing.T) {
		b := bytes.Clone(orig)
		b[set[format.IndexFile].Offset+2] ^= 0xff
		write(t, b)
		_, err := OpenFiles(set, Options{})
		corrupt(t, err, format.IndexFile)
	})
	t.Run("region shorter than the manifest says", func(t *testing.T) {
		s := clone()
		r := s[format.DataFile]
		r.Length -= 8
		s[format.DataFile] = r
		_, err := OpenFiles(s, Options{})
		corrupt(t, err, format.DataFile)
	})
	t.Run("region shifted", func(t *testing.T) {
		s := clone()
		r := s[format.HashFile]
		r.Offset += 4096
		s[format.HashFile] = r
		_, err := OpenFiles(s, Options{})
		corrupt(t, err, "")
	})
	t.Run("no manifest", func(t *testing.T) {
		s := clone()
		delete(s, format.ManifestFile)
		_, err := OpenFiles(s, Options{})
		corrupt(t, err, format.ManifestFile)
	})
	t.Run("a listed file missing", func(t *testing.T) {
		s := clone()
		delete(s, format.TailFile)
		_, err := OpenFiles(s, Options{})
		corrupt(t, err, format.TailFile)
	})
	t.Run("a file the manifest does not list", func(t *testing.T) {
		s := clone()
		s["extra.bin"] = s[format.DataFile]
		_, err := OpenFiles(s, Options{})
		corrupt(t, err, "extra.bin")
	})
	t.Run("missing file", func(t *testing.T) {
		s := clone()
		for k, r := range s {
			r.Path += ".gone"
			s[k] = r
		}
		if _, err := OpenFiles(s, Options{}); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("got %v, want not-exist", err)
		}
	})
	// Intact again: it opens.
	s, err := OpenFiles(set, Options{})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
}
