package lake

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/localcache/snapshot"
)

// sameAnswers fails unless got (opened from the lake) answers every
// lookup, Info and Get (whole range and two sub-ranges) exactly as the
// snapshot directory dir does, and holds the same bytes for every file.
func sameAnswers(t *testing.T, got *snapshot.Snapshot, dir string) {
	t.Helper()
	want, err := snapshot.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer want.Close()
	if got.ID() != want.ID() || got.NumSeries() != want.NumSeries() {
		t.Fatalf("opened %s with %d series, want %s with %d", got.ID(), got.NumSeries(), want.ID(), want.NumSeries())
	}
	same := func(a, b snapshot.Points) bool {
		if a.Len() != b.Len() {
			return false
		}
		for i := range a.Len() {
			if a.Unix(i) != b.Unix(i) || a.Values[i] != b.Values[i] {
				return false
			}
		}
		return true
	}
	for r := uint32(0); r < uint32(want.NumSeries()); r++ {
		in := want.Info(r)
		gr, ok := got.Lookup(in.ID)
		if !ok || gr != r {
			t.Fatalf("Lookup(%s) = %d %v, want %d", in.ID, gr, ok, r)
		}
		gi := got.Info(r)
		if math.IsNaN(gi.LatestValue) && math.IsNaN(in.LatestValue) {
			gi.LatestValue, in.LatestValue = 0, 0 // a series without points
		}
		if gi != in {
			t.Fatalf("Info(%s) = %+v, want %+v", in.ID, gi, in)
		}
		mid := in.First + (in.Last-in.First)/2
		for _, rg := range [][2]int64{{snapshot.MinTime, snapshot.MaxTime}, {in.First, mid}, {mid + 1, in.Last + 86400*400}} {
			a, errA := got.Get(r, rg[0], rg[1])
			b, errB := want.Get(r, rg[0], rg[1])
			if errA != nil || errB != nil || !same(a, b) {
				t.Fatalf("Get(%s, %d, %d): %v/%v, %d points, want %d", in.ID, rg[0], rg[1], errA, errB, a.Len(), b.Len())
			}
		}
	}
	if _, ok := got.Lookup("NO.SUCH.SERIES"); ok {
		t.Fatal("Lookup found a series that does not exist")
	}
	names := []string{format.ManifestFile}
	for _, f := range want.Manifest.Files {
		names = append(names, f.Name)
	}
	for _, name := range names {
		disk, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if b, ok := got.FileBytes(name); !ok || !bytes.Equal(b, disk) {
			t.Fatalf("FileBytes(%s) is not the published file", name)
		}
	}
}

// TestOpenSnapshotInPlace publishes two vintages of each sample set (one
// with a cold tier, one with timestamp periods) and opens the current and
// the older vintage with OpenSnapshot, mapped in place out of the Puffin
// file and, in the second pass, downloaded into the cache first (the
// remote-warehouse path): each answers exactly as its snapshot directory.
func TestOpenSnapshotInPlace(t *testing.T) {
	ctx := context.Background()
	home := t.TempDir()
	l := openLake(t, home)
	cases := []struct {
		dataset string
		tail    *format.TailRule
	}{
		{"iowa", nil},
		{"stocks", format.TailList("MSFT", "IBM")},
		{"seattle", nil},
	}
	for _, c := range cases {
		t.Run(c.dataset, func(t *testing.T) {
			tab := sampleTable(t, c.dataset)
			dir1 := writeSnapshot(t, c.dataset, tab, format.WriteOptions{Epoch: 1, CoversThroughSeq: 7, Tail: c.tail})
			dir2 := writeSnapshot(t, c.dataset, scaled(tab, 1.5), format.WriteOptions{Epoch: 2, CoversThroughSeq: 9, Tail: c.tail})
			v1 := mustPublish(t, l, c.dataset, dir1)
			mustPublish(t, l, c.dataset, dir2)
			cur, err := l.Current(ctx, c.dataset)
			if err != nil {
				t.Fatal(err)
			}
			for _, download := range []bool{false, true} {
				l.forceDownload = download
				for _, x := range []struct {
					v   Vintage
					dir string
				}{{cur, dir2}, {v1, dir1}} {
					s, err := l.OpenSnapshot(ctx, c.dataset, x.v, snapshot.Options{})
					if err != nil {
						t.Fatalf("download=%v: %v", download, err)
					}
					if s.Dir != "" {
						t.Fatalf("Dir %q for a snapshot mapped out of the lake", s.Dir)
					}
					if c.tail != nil {
						if _, ok := s.FileBytes(format.TailFile); !ok {
							t.Fatal("the cold-tier case has no tail")
						}
					}
					sameAnswers(t, s, x.dir)
					s.Close()
				}
			}
			l.forceDownload = false
		})
	}
	// Two vintages per dataset were downloaded: one verified copy each,
	// no temporary file left; opening again reuses them.
	ents, err := os.ReadDir(filepath.Join(home, Dir, CacheDir))
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 2*len(cases) {
		t.Fatalf("cache holds %d files, want %d", len(ents), 2*len(cases))
	}
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".puffin") {
			t.Fatalf("cache holds %s", e.Name())
		}
	}
}

// TestOpenSnapshotOldPuffinLayout: a vintage whose table metadata does not
// carry the blob offsets (published before they were recorded there) is
// located through the Puffin footer and opens the same.
func TestOpenSnapshotOldPuffinLayout(t *testing.T) {
	ctx := context.Background()
	l := openLake(t, t.TempDir())
	recordOffsets = false
	defer func() { recordOffsets = true }()
	dir := cookSample(t, "stocks", format.WriteOptions{Tail: format.TailList("AAPL")})
	v := mustPublish(t, l, "stocks", dir)
	tbl, _ := l.Table(ctx, "stocks")
	sf, _ := statisticsOf(tbl, v.IcebergSnapshot)
	if _, ok, err := blobsFromMetadata(sf); ok || err != nil {
		t.Fatalf("the old layout carries offsets (%v, %v): the test does not test the footer path", ok, err)
	}
	s, err := l.OpenSnapshot(ctx, "stocks", v, snapshot.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	sameAnswers(t, s, dir)
}

// TestOpenSnapshotRefusesBadPuffin: a truncated Puffin file, a damaged
// manifest blob, a damaged data blob on download, blobs not page-aligned
// (through the table metadata and through the footer), a missing Puffin
// file, another engine's commit, an expired vintage and a vintage whose
// es id disagrees are each refused with their typed error; nothing is
// left in the cache.
func TestOpenSnapshotRefusesBadPuffin(t *testing.T) {
	ctx := context.Background()
	home := t.TempDir()
	l := openLake(t, home)
	dir := cookSample(t, "stocks", format.WriteOptions{Tail: format.TailList("MSFT")})
	v := mustPublish(t, l, "stocks", dir)
	si, err := l.Artifacts(ctx, "stocks", v)
	if err != nil {
		t.Fatal(err)
	}
	orig, err := os.ReadFile(si.Path)
	if err != nil {
		t.Fatal(err)
	}
	restore := func() {
		if err := os.WriteFile(si.Path, orig, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	corrupt := func(what string, err error) {
		t.Helper()
		var ce *format.CorruptionError
		if !errors.As(err, &ce) {
			t.Fatalf("%s: %v, want a CorruptionError", what, err)
		}
	}
	cacheFiles := func() int {
		ents, _ := os.ReadDir(filepath.Join(home, Dir, CacheDir))
		return len(ents)
	}
	open := func() error {
		s, err := l.OpenSnapshot(ctx, "stocks", v, snapshot.Options{})
		if err == nil {
			s.Close()
		}
		return err
	}

	for _, name := range []string{format.TailFile, format.DataFile, format.IndexFile} {
		b, _ := si.Blob(name)
		if err := os.WriteFile(si.Path, orig[:b.Offset+b.Length/2], 0o644); err != nil {
			t.Fatal(err)
		}
		corrupt("truncated inside "+name, open())
		l.forceDownload = true
		corrupt("download of a file truncated inside "+name, open())
		l.forceDownload = false
	}
	restore()

	bad := bytes.Clone(orig)
	mb, _ := si.Blob(format.ManifestFile)
	bad[mb.Offset+10] ^= 0x41
	os.WriteFile(si.Path, bad, 0o644)
	corrupt("flipped manifest byte", open())
	restore()

	// A flipped byte deep inside data.arrow: mapping in place does not
	// read it (as a directory snapshot's open does not), a download
	// verifies every blob and refuses it, caching nothing.
	bad = bytes.Clone(orig)
	db, _ := si.Blob(format.DataFile)
	bad[db.Offset+db.Length/2] ^= 0xff
	os.WriteFile(si.Path, bad, 0o644)
	l.forceDownload = true
	err = open()
	var ce *format.CorruptionError
	if !errors.As(err, &ce) || ce.File != format.DataFile {
		t.Fatalf("download of a damaged data blob: %v, want a CorruptionError on %s", err, format.DataFile)
	}
	if n := cacheFiles(); n != 0 {
		t.Fatalf("a refused download left %d files in the cache", n)
	}
	l.forceDownload = false
	restore()
	if err := open(); err != nil {
		t.Fatalf("intact again: %v", err)
	}

	// Missing Puffin file.
	os.Rename(si.Path, si.Path+".away")
	if err := open(); !errors.Is(err, ErrNoServingIndex) {
		t.Fatalf("missing Puffin file: %v, want ErrNoServingIndex", err)
	}
	os.Rename(si.Path+".away", si.Path)

	// Not page-aligned, located through the table metadata and through
	// the footer.
	for _, offsets := range []bool{true, false} {
		puffinAlign, recordOffsets = 8, offsets
		u := mustPublish(t, l, "stocks", writeSnapshot(t, "stocks", scaled(sampleTable(t, "stocks"), 3), format.WriteOptions{CoversThroughSeq: 5}))
		puffinAlign, recordOffsets = PageSize, true
		s, err := l.OpenSnapshot(ctx, "stocks", u, snapshot.Options{})
		if err == nil {
			s.Close()
		}
		corrupt(fmt.Sprintf("unaligned blobs (offsets in metadata: %v)", offsets), err)
		if !strings.Contains(err.Error(), "page-aligned") {
			t.Fatalf("unaligned: %v does not say why", err)
		}
	}

	// Another engine's commit; a vintage whose es id disagrees; an
	// expired vintage.
	foreign := foreignAppend(t, l, "stocks")
	var ne *NoServingIndexError
	if _, err := l.OpenSnapshot(ctx, "stocks", Vintage{IcebergSnapshot: foreign}, snapshot.Options{}); !errors.As(err, &ne) || ne.IcebergSnapshot != foreign {
		t.Fatalf("foreign commit: %v, want a NoServingIndexError naming %d", err, foreign)
	}
	wrong := v
	wrong.Snapshot = "e9-s9-000000000000"
	if _, err := l.OpenSnapshot(ctx, "stocks", wrong, snapshot.Options{}); !errors.Is(err, ErrUnknownVintage) {
		t.Fatalf("es id mismatch: %v, want ErrUnknownVintage", err)
	}
	if _, err := l.Expire(ctx, "stocks", 1, 0); err != nil {
		t.Fatal(err)
	}
	// v's metadata is still in this Lake's cached table: the open must
	// notice the expiry.
	if _, err := l.OpenSnapshot(ctx, "stocks", v, snapshot.Options{}); !errors.Is(err, ErrUnknownVintage) {
		t.Fatalf("expired vintage: %v, want ErrUnknownVintage", err)
	}
	if _, err := l.OpenSnapshot(ctx, "nosuch", v, snapshot.Options{}); !errors.Is(err, ErrNoDataset) {
		t.Fatalf("unknown dataset: %v", err)
	}
}

// TestDownloadCacheBound: downloaded Puffin files are kept within
// Options.CacheBytes, least recently opened first out (an open of a
// cached copy counts as use); Expire deletes the copies of the vintages
// it expires.
func TestDownloadCacheBound(t *testing.T) {
	ctx := context.Background()
	home := t.TempDir()
	l := openLake(t, home)
	l.forceDownload = true
	tab := sampleTable(t, "iowa")
	var vs []Vintage
	for i := range 3 {
		vs = append(vs, mustPublish(t, l, "iowa", writeSnapshot(t, "iowa", scaled(tab, float64(i+1)), format.WriteOptions{CoversThroughSeq: uint64(i)})))
	}
	tbl, _ := l.Table(ctx, "iowa")
	cached := func(v Vintage) bool {
		sf, _ := statisticsOf(tbl, v.IcebergSnapshot)
		_, err := os.Stat(filepath.Join(home, Dir, CacheDir, cacheName(sf.StatisticsPath)))
		return err == nil
	}
	open := func(v Vintage) {
		t.Helper()
		s, err := l.OpenSnapshot(ctx, "iowa", v, snapshot.Options{})
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
		time.Sleep(20 * time.Millisecond) // distinct use times
	}
	open(vs[0])
	sf, _ := statisticsOf(tbl, vs[0].IcebergSnapshot)
	l.opts.CacheBytes = sf.FileSizeInBytes*5/2 + 1024 // room for two
	open(vs[1])
	open(vs[2])
	if cached(vs[0]) || !cached(vs[1]) || !cached(vs[2]) {
		t.Fatalf("after three downloads with room for two: cached %v %v %v, want the last two", cached(vs[0]), cached(vs[1]), cached(vs[2]))
	}
	open(vs[1]) // used again: now the newest
	open(vs[0]) // downloaded again: evicts vs[2], the least recently used
	if !cached(vs[0]) || !cached(vs[1]) || cached(vs[2]) {
		t.Fatalf("LRU: cached %v %v %v, want vintages 0 and 1", cached(vs[0]), cached(vs[1]), cached(vs[2]))
	}
	if _, err := l.Expire(ctx, "iowa", 1, 0); err != nil {
		t.Fatal(err)
	}
	if cached(vs[0]) || cached(vs[1]) {
		t.Fatal("Expire left the cached copies of the vintages it expired")
	}
	open(vs[2])
	if !cached(vs[2]) {
		t.Fatal("the kept vintage is not cached after an open")
	}
}

// TestVerifyVintage: Verify passes on an intact vintage, in place and
// through the download cache, and names the file of a flipped byte that
// an in-place open does not read.
func TestVerifyVintage(t *testing.T) {
	ctx := context.Background()
	l := openLake(t, t.TempDir())
	v := mustPublish(t, l, "stocks", cookSample(t, "stocks", format.WriteOptions{Tail: format.TailList("IBM")}))
	for _, dl := range []bool{false, true} {
		l.forceDownload = dl
		if err := l.Verify(ctx, "stocks", v); err != nil {
			t.Fatalf("download=%v: %v", dl, err)
		}
	}
	l.forceDownload = false
	si, err := l.Artifacts(ctx, "stocks", v)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{format.TailFile, format.DataFile} {
		b, _ := si.Blob(name)
		orig, _ := os.ReadFile(si.Path)
		bad := bytes.Clone(orig)
		bad[b.Offset+b.Length/2] ^= 0x10
		os.WriteFile(si.Path, bad, 0o644)
		s, err := l.OpenSnapshot(ctx, "stocks", v, snapshot.Options{})
		if err != nil {
			t.Fatalf("the in-place open reads %s's last bytes: %v (the test needs a byte it does not read)", name, err)
		}
		s.Close()
		err = l.Verify(ctx, "stocks", v)
		var ce *format.CorruptionError
		if !errors.As(err, &ce) || ce.File != name {
			t.Fatalf("flipped byte in %s: Verify says %v", name, err)
		}
		os.WriteFile(si.Path, orig, 0o644)
	}
	if err := l.Verify(ctx, "stocks", v); err != nil {
		t.Fatal(err)
	}
}
