package lake

import (
	"os"
	"path/filepath"
	"sync"
	"time"
	"weak"

	"github.com/energyscope/energyscope/localcache/snapshot"
)

// The download cache (Options.CacheDir, bounded by CacheBytes): verified
// copies of remote Puffin files, one per vintage, named by cacheName. A
// copy's modification time is when it was last used (downloaded, or
// opened again: download's hit, OpenServing), and pruneCache deletes the
// least recently used first, but never a copy a snapshot of this Lake
// still maps (inUse): the vintage a server serves, or an as-of vintage a
// reader holds, may have been opened long ago and read ever since
// through its mapping, which no file time records. Deleting it would
// leave the mapping working on Unix but make the next start download it
// again (or, with the catalog down, not serve it at all).

// cacheUse records the cached copies this Lake mapped (guarded by its
// mutex): weak pointers, so a snapshot let go and collected drops out.
type cacheUse struct {
	sync.Mutex
	m map[string][]weak.Pointer[snapshot.Snapshot]
}

// noteMapped records that s maps the cached copy at path (nothing for a
// path outside the cache: a file:// warehouse's own file).
func (l *Lake) noteMapped(path string, s *snapshot.Snapshot) {
	if l.opts.CacheDir == "" || filepath.Dir(path) != filepath.Clean(l.opts.CacheDir) {
		return
	}
	l.cached.Lock()
	defer l.cached.Unlock()
	if l.cached.m == nil {
		l.cached.m = map[string][]weak.Pointer[snapshot.Snapshot]{}
	}
	l.cached.m[path] = append(l.cached.m[path], weak.Make(s))
}

// inUse reports whether a snapshot of this Lake still maps the cached
// copy at path (a reference taken and dropped at once tells), and forgets
// the snapshots that were let go.
func (l *Lake) inUse(path string) bool {
	l.cached.Lock()
	ps := append([]weak.Pointer[snapshot.Snapshot](nil), l.cached.m[path]...)
	l.cached.Unlock()
	var live []weak.Pointer[snapshot.Snapshot]
	for _, p := range ps {
		if s := p.Value(); s != nil && s.TryRef() {
			s.Unref() // outside the lock: the last Unref runs the snapshot's OnClose
			live = append(live, p)
		}
	}
	l.cached.Lock()
	defer l.cached.Unlock()
	if len(l.cached.m[path]) == len(ps) { // none noted meanwhile
		if len(live) == 0 {
			delete(l.cached.m, path)
		} else {
			l.cached.m[path] = live
		}
	}
	return len(live) > 0
}

// touchCached marks the cached copy at path used now (pruned last).
func touchCached(path string) {
	now := time.Now()
	os.Chtimes(path, now, now)
}
