//go:build linux

package snapshot_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/localcache/snapshot"
)

// residentKiB sums the Rss of this process's mappings of path (all of its
// mapping regions), from /proc/self/smaps.
func residentKiB(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	total, in := 0, false
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		if !strings.HasSuffix(f[0], ":") && strings.Contains(f[0], "-") {
			in = len(f) >= 6 && f[len(f)-1] == path
			continue
		}
		if in && f[0] == "Rss:" {
			kb, _ := strconv.Atoi(f[1])
			total += kb
		}
	}
	return total
}

// writeDaily writes a snapshot of series daily series of perSeries points
// each (series s, day d: value s*perSeries+d), named by names, in record
// batches of batchRows rows.
func writeDaily(t *testing.T, series, perSeries, batchRows int, names func(s int) (id, name string)) (string, *format.Manifest) {
	t.Helper()
	tb := &format.Table{}
	for s := range series {
		id, name := names(s)
		tb.Series = append(tb.Series, format.SeriesMeta{ID: id, Frequency: format.Daily, Name: name, Unit: "u"})
		for d := range perSeries {
			tb.Append(uint32(s), int64(d)*86400, float64(s*perSeries+d))
		}
	}
	dir := filepath.Join(t.TempDir(), "snap")
	m, _, err := format.Write(dir, tb, format.WriteOptions{Dataset: "snap", Created: time.Unix(1e9, 0), BatchRows: batchRows})
	if err != nil {
		t.Fatal(err)
	}
	return dir, m
}

// settle drops the files from the page cache and reads them back
// sequentially, as the pet bench does: readahead then holds them in large
// folios, which a fault maps whole.
func settle(t *testing.T, dir string) {
	t.Helper()
	buf := make([]byte, 1<<20)
	for _, name := range []string{format.DataFile, format.IndexFile, format.HashFile} {
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
			t.Fatal(err)
		}
		if _, err := io.CopyBuffer(io.Discard, struct{ io.Reader }{f}, buf); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
}

// TestLookupsMapOnlyWhatTheyRead: open leaves no page of the snapshot's
// files mapped, and listing every id (SeriesID) and reading every point of
// every series maps data.arrow's periods and values and the ids' bytes in
// index.arrow only (to the page), never the `series` column, the offsets
// of the ids or the other index columns that share large
// page-cache folios with them (issue 14: RSS after open and after reading
// every series).
func TestLookupsMapOnlyWhatTheyRead(t *testing.T) {
	const series, perSeries = 20_000, 40 // 800K rows: 4 record batches of data.arrow
	idBytes := 0
	var ids []string // in id order: row r is series r
	dir, m := writeDaily(t, series, perSeries, 1<<18, func(s int) (id, name string) {
		id = fmt.Sprintf("DATASET.SERIES_%06d.WITH_A_LONGER_ID_TO_FILL_PAGES", s)
		idBytes += len(id)
		ids = append(ids, id)
		return id, strings.Repeat("name ", 40) + id
	})
	if m.Batches < 2 {
		t.Fatalf("%d batches: the test needs batch boundaries", m.Batches)
	}
	settle(t, dir)
	s, err := snapshot.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	data, index := filepath.Join(dir, format.DataFile), filepath.Join(dir, format.IndexFile)
	for _, name := range []string{format.DataFile, format.IndexFile, format.HashFile} {
		if kb := residentKiB(t, filepath.Join(dir, name)); kb != 0 {
			t.Errorf("after open, %s: %d KiB resident, want 0 (open reads headers and footers only and must not keep their folios mapped)", name, kb)
		}
	}
	var sum float64
	var rows int
	for r := range uint32(s.NumSeries()) {
		id := s.SeriesID(r)
		if id != ids[r] {
			t.Fatalf("SeriesID(%d) = %q, want %q", r, id, ids[r])
		}
		row, ok := s.Lookup(id)
		if !ok || row != r {
			t.Fatalf("series %d does not resolve", r)
		}
		p, err := s.Get(row, snapshot.MinTime, snapshot.MaxTime)
		if err != nil {
			t.Fatal(err)
		}
		for i := range p.Len() {
			sum += p.Values[i] + float64(p.Days[i])
		}
		rows += p.Len()
	}
	if rows != series*perSeries {
		t.Fatalf("read %d rows, want %d", rows, series*perSeries)
	}
	page := os.Getpagesize() >> 10
	// Periods and values: 12 bytes a row, plus at most the partial page at
	// each end of each batch's span.
	if got, want := residentKiB(t, data), rows*12>>10+2*page*m.Batches+page; got > want {
		t.Errorf("after reading every series, data.arrow: %d KiB resident, want <= %d (periods and values)", got, want)
	}
	// The ids' bytes (SeriesID and the lookup's compare find them through
	// the hot record, not index.arrow's offsets column), plus the partial
	// pages at their ends.
	if got, want := residentKiB(t, index), idBytes>>10+2*page+page; got > want {
		t.Errorf("after reading every series, index.arrow: %d KiB resident, want <= %d (the series ids' bytes)", got, want)
	}
	if sum == 0 {
		t.Fatal("nothing read")
	}
}

// kernelMappings counts this process's mapping regions (VMAs) of path.
func kernelMappings(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 6 && f[len(f)-1] == path {
			n++
		}
	}
	return n
}

// TestIndexColumnsSplitOnFirstRead: open splits off index.arrow's series
// id column only (what lookups read; each region is a kernel mapping, a
// few µs of open to make), and the first Info or search splits off every
// other column buffer before reading it, once.
func TestIndexColumnsSplitOnFirstRead(t *testing.T) {
	dir, _ := writeDaily(t, 2_000, 3, 1<<12, func(s int) (id, name string) {
		id = fmt.Sprintf("DATASET.SERIES_%06d.WITH_A_LONGER_ID_THAN_THE_RECORD_HOLDS", s)
		return id, "name of " + id
	})
	index := filepath.Join(dir, format.IndexFile)
	for _, first := range []string{"info", "search"} {
		s, err := snapshot.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		opened := kernelMappings(t, index)
		// The id column is an offsets and a data buffer: at most two
		// regions, the pages they share, and the rest of the file on
		// either side.
		if opened < 2 || opened > 5 {
			t.Fatalf("after open, index.arrow is %d kernel mappings, want 2-5 (the id column split off)", opened)
		}
		for r := range uint32(s.NumSeries()) {
			if _, ok := s.Lookup(s.SeriesID(r)); !ok {
				t.Fatalf("series %d does not resolve", r)
			}
		}
		if n := kernelMappings(t, index); n != opened {
			t.Fatalf("lookups changed index.arrow's kernel mappings: %d, want %d", n, opened)
		}
		switch first {
		case "info":
			if info := s.Info(7); info.Name != "name of "+info.ID || info.Count != 3 {
				t.Fatalf("Info(7) = %+v", info)
			}
		case "search":
			if m := s.Search("SERIES_000007", 5); len(m) != 1 || m[0].Row != 7 {
				t.Fatalf("Search: %+v", m)
			}
		}
		// Eleven columns, several with two buffers: far more regions.
		split := kernelMappings(t, index)
		if split < opened+10 {
			t.Fatalf("after the first %s, index.arrow is %d kernel mappings, want at least %d (every column buffer split off)", first, split, opened+10)
		}
		s.Info(8)
		s.Search("name", 3)
		if n := kernelMappings(t, index); n != split {
			t.Fatalf("a second read split index.arrow again: %d kernel mappings, want %d", n, split)
		}
		s.Close()
		if n := kernelMappings(t, index); n != 0 {
			t.Fatalf("after Close, %d kernel mappings of index.arrow remain", n)
		}
	}
}

// cachedBytes is how many bytes of path the page cache holds (mincore over
// a mapping of its own, which maps nothing in).
func cachedBytes(t *testing.T, path string) int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	b, err := unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(b)
	ps := os.Getpagesize()
	vec := make([]byte, (len(b)+ps-1)/ps)
	if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b)), uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
		t.Fatal(e)
	}
	n := 0
	for _, v := range vec {
		n += int(v&1) * ps
	}
	return n
}

// evictFiles writes back and drops the snapshot's files from the page
// cache, as after a reboot.
func evictFiles(t *testing.T, dir string) {
	t.Helper()
	for _, name := range []string{format.DataFile, format.IndexFile, format.HashFile} {
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		var fs unix.Statfs_t
		if err := unix.Fstatfs(int(f.Fd()), &fs); err != nil {
			t.Fatal(err)
		}
		if fs.Type == unix.TMPFS_MAGIC {
			t.Skipf("%s is on tmpfs, whose pages cannot be evicted: the test needs a disk-backed TMPDIR", dir)
		}
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
		if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
			t.Fatal(err)
		}
		f.Close()
		if n := cachedBytes(t, filepath.Join(dir, name)); n != 0 {
			t.Fatalf("%s: %d bytes still cached after FADV_DONTNEED", name, n)
		}
	}
}

// TestLargeSnapshotWarmsPageCache: a snapshot opened with Options.Warm
// whose lookups read at least warmSnapshotBytes has index.hash and the points read into the page cache
// in the background after open, without any of it mapped into the process
// (RSS unchanged) and without index.arrow; a smaller one, or one opened
// without the option, is not warmed;
// closing a snapshot ends its warm-up (issue 14, BENCHMARKS.md "Warming
// large snapshots").
func TestLargeSnapshotWarmsPageCache(t *testing.T) {
	const series, perSeries = 5_000, 40
	dir, m := writeDaily(t, series, perSeries, 1<<16, func(s int) (id, name string) {
		return fmt.Sprintf("S%05d", s), strings.Repeat("n", 200)
	})
	data, hash, index := filepath.Join(dir, format.DataFile), filepath.Join(dir, format.HashFile), filepath.Join(dir, format.IndexFile)

	// What open alone brings into the page cache (headers and footers).
	evictFiles(t, dir)
	small, err := snapshot.OpenOptions(dir, snapshot.Options{Warm: true})
	if err != nil {
		t.Fatal(err)
	}
	if small.Warming() || small.WaitWarm() != nil {
		t.Errorf("a %d-row snapshot is warmed", m.Rows)
	}
	openCached := map[string]int{}
	for _, path := range []string{data, hash, index} {
		openCached[path] = cachedBytes(t, path)
	}
	small.Close()

	defer snapshot.SetWarmSnapshotBytes(1)()
	// Above the size, without the option: not warmed.
	off, err := snapshot.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if off.Warming() {
		t.Error("warmed without Options.Warm")
	}
	off.Close()

	warm := snapshot.Options{Warm: true}
	evictFiles(t, dir)
	s, err := snapshot.OpenOptions(dir, warm)
	if err != nil {
		t.Fatal(err)
	}
	closeS := sync.OnceFunc(func() { s.Close() })
	defer closeS()
	if !s.Warming() {
		t.Fatal("not warmed above the threshold")
	}
	if err := s.WaitWarm(); err != nil {
		t.Fatalf("warm-up: %v", err)
	}
	rows := series * perSeries
	hs, _ := os.Stat(hash)
	if got := cachedBytes(t, hash); got < int(hs.Size()) {
		t.Errorf("index.hash: %d of %d bytes cached after the warm-up", got, hs.Size())
	}
	if got := cachedBytes(t, data); got < rows*12 {
		t.Errorf("data.arrow: %d bytes cached after the warm-up, want at least the points' %d", got, rows*12)
	}
	if got := cachedBytes(t, index); got != openCached[index] {
		t.Errorf("index.arrow: %d bytes cached after the warm-up, want %d as after an open without one (lookups do not read it)", got, openCached[index])
	}
	if openCached[data] >= rows*12 || openCached[hash] >= int(hs.Size()) {
		t.Fatalf("an open without a warm-up caches %d bytes of data.arrow and %d of index.hash: the test cannot tell the warm-up's", openCached[data], openCached[hash])
	}
	for _, path := range []string{data, hash, index} {
		if kb := residentKiB(t, path); kb != 0 {
			t.Errorf("%s: %d KiB resident in the process after the warm-up, want 0", filepath.Base(path), kb)
		}
	}
	for r := range uint32(series) {
		p, err := s.Get(r, snapshot.MinTime, snapshot.MaxTime)
		if err != nil {
			t.Fatal(err)
		}
		if p.Len() != perSeries || p.Values[perSeries-1] != float64(int(r)*perSeries+perSeries-1) {
			t.Fatalf("series %d: %d points, last %v", r, p.Len(), p.Values)
		}
	}

	// Two at once: one warms after the other, both end.
	closeS()
	evictFiles(t, dir)
	var two [2]*snapshot.Snapshot
	for i := range two {
		if two[i], err = snapshot.OpenOptions(dir, warm); err != nil {
			t.Fatal(err)
		}
	}
	for i, x := range two {
		if err := x.WaitWarm(); err != nil {
			t.Errorf("snapshot %d of two: warm-up: %v", i, err)
		}
		x.Close()
	}
	if got := cachedBytes(t, data); got < rows*12 {
		t.Errorf("two warm-ups: data.arrow: %d bytes cached, want at least %d", got, rows*12)
	}

	// Closed at once: the warm-up ends.
	evictFiles(t, dir)
	c, err := snapshot.OpenOptions(dir, warm)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	done := make(chan error, 1)
	go func() { done <- c.WaitWarm() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("warm-up of a closed snapshot: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the warm-up of a closed snapshot did not end")
	}
}
