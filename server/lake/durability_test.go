package lake

import (
	"context"
	"path/filepath"
	"sync"
	"testing"

	"github.com/energyscope/energyscope/localcache/format"
)

// TestCommitFilesAreFsynced: every file a publish leaves in the warehouse
// (data files, manifests, manifest list, Puffin file, metadata file) was
// fsynced by the IO scheme, and so was its directory. With iceberg-go's
// own LocalFS (which never fsyncs) this fails. (Every write starts a
// background fsync here, as a large file's do: the race detector
// watches them.)
func TestCommitFilesAreFsynced(t *testing.T) {
	defer func(n int64) { syncAheadBytes = n }(syncAheadBytes)
	syncAheadBytes = 1
	var mu sync.Mutex
	synced := map[string]bool{}
	hook := func(p string) {
		mu.Lock()
		synced[filepath.Clean(p)] = true
		mu.Unlock()
	}
	syncHook.Store(&hook)
	t.Cleanup(func() { syncHook.Store(nil) })

	home := t.TempDir()
	l := openLake(t, home)
	tab := sampleTable(t, "stocks")
	mustPublish(t, l, "stocks", writeSnapshot(t, "stocks", tab, format.WriteOptions{}))
	mustPublish(t, l, "stocks", writeSnapshot(t, "stocks", scaled(tab, 2), format.WriteOptions{}))
	files := warehouseFiles(t, home)
	if len(files) < 8 {
		t.Fatalf("only %d files in the warehouse: %v", len(files), files)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, f := range files {
		if !synced[f] {
			t.Errorf("%s was not fsynced", f)
		}
		for d := filepath.Dir(f); d != filepath.Dir(filepath.Join(home, Dir)); d = filepath.Dir(d) {
			if !synced[d] {
				t.Errorf("directory %s (holding %s) was not fsynced", d, f)
			}
		}
	}
	tbl, _ := l.Table(context.Background(), "stocks")
	checkNoOrphans(t, home, tbl)
}
