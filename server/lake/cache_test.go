package lake

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/localcache/snapshot"
)

// TestCacheKeepsWhatIsUsed: the download cache's bound never evicts a
// copy a snapshot still maps, and a copy opened again with OpenServing
// (a server's start) counts as just used. Before, the prune after a
// download went by modification time only: it deleted the copy of the
// vintage being served (mapped since long ago), and OpenServing did not
// refresh the time, so the copy a restart had just mapped went first.
func TestCacheKeepsWhatIsUsed(t *testing.T) {
	ctx := context.Background()
	l := openLake(t, t.TempDir())
	tab := sampleTable(t, "stocks")
	var vs []Vintage
	for i := range 3 {
		dir := writeSnapshot(t, "stocks", scaled(tab, float64(i+1)), format.WriteOptions{Epoch: uint64(i + 1), CoversThroughSeq: uint64(i + 1)})
		vs = append(vs, mustPublish(t, l, "stocks", dir))
	}
	l.forceDownload = true // the remote path: every open maps a verified copy in the cache
	l.opts.CacheBytes = 1  // every download prunes all it may
	open := func(v Vintage) (*snapshot.Snapshot, *ServingIndex, string) {
		t.Helper()
		s, si, err := l.OpenSnapshotIndex(ctx, "stocks", v, snapshot.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return s, si, filepath.Join(l.opts.CacheDir, cacheName(si.Location))
	}
	exists := func(p string) bool { _, err := os.Stat(p); return err == nil }

	// V1 in use (a server serves it) while V2 is downloaded.
	s1, si1, p1 := open(vs[0])
	s2, _, p2 := open(vs[1])
	if !exists(p1) {
		t.Fatal("the prune after V2's download deleted V1's copy, which a snapshot maps")
	}
	if _, ok := s1.Lookup("MSFT"); !ok {
		t.Fatal("V1 does not answer")
	}
	s1.Close()
	s2.Close()

	// Neither in use: V1 downloaded before V2, then opened again by
	// OpenServing (a restart). V3's download must evict V2, the least
	// recently used, and keep V1.
	old := time.Now().Add(-2 * time.Hour)
	os.Chtimes(p1, old, old)
	os.Chtimes(p2, old.Add(time.Hour), old.Add(time.Hour))
	s, err := l.OpenServing("stocks", si1, snapshot.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	st1, err1 := os.Stat(p1)
	st2, err2 := os.Stat(p2)
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	l.opts.CacheBytes = st1.Size() + st2.Size() + st1.Size()/2 // room for two copies, not three
	s3, _, _ := open(vs[2])
	defer s3.Close()
	if !exists(p1) || exists(p2) {
		t.Fatalf("after V3's download: V1's copy (opened again last) there %v, V2's (least recently used) there %v; want V1 kept, V2 evicted", exists(p1), exists(p2))
	}
}
