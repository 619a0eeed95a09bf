package snapshot

import (
	"fmt"
	"sync"

	"github.com/energyscope/energyscope/localcache/format"
)

// DefaultTailCacheBytes bounds the decoded cold-tier blocks one snapshot
// keeps when Options.TailCacheBytes is zero: some 680 row groups of 8Ki
// date32 rows (12 bytes a point decoded), 5.5 million cold points.
const DefaultTailCacheBytes = 64 << 20

// Options tunes OpenOptions. The zero value gives the defaults.
type Options struct {
	// TailCacheBytes bounds the memory of decoded cold-tier blocks kept
	// for reuse, least recently used out first. 0 means
	// DefaultTailCacheBytes; negative keeps nothing (every cold read
	// decodes its block).
	TailCacheBytes int64
	// Warm reads what lookups read (index.hash and the points) into the
	// page cache in 2 MiB folios in the background after open, when that
	// is warmSnapshotBytes or more (warm.go). Off by default: on the
	// development machine (a virtual machine) lookups over 2 MiB folios
	// were 5-10% faster than over 4 KiB ones in most runs and 30-45%
	// slower in some, for a reason not found (BENCHMARKS.md "Warming
	// large snapshots").
	Warm bool
	// HugeIndex serves lookups from a copy of index.hash in anonymous
	// memory in 2 MiB pages, made in the background after open, when
	// index.hash is hugeIndexBytes (64 MiB) or more (hugeindex.go). For a
	// store's serving snapshot: every snapshot opened with it holds its
	// index.hash in RAM.
	HugeIndex bool
}

// tailState is the cold tier of a snapshot: tail.parquet mapped at Open,
// its footer parsed on the first cold read (Open stays O(1)), row groups
// decoded on demand into a bounded cache.
type tailState struct {
	open  func() (*format.Tail, error)
	cache blockCache
}

func newTailState(b []byte, pt format.PeriodType, rows, budget int64) *tailState {
	if budget == 0 {
		budget = DefaultTailCacheBytes
	}
	t := &tailState{cache: blockCache{budget: budget, m: map[uint32]*cacheEntry{}}}
	t.cache.lru.prev, t.cache.lru.next = &t.cache.lru, &t.cache.lru
	t.open = sync.OnceValues(func() (*format.Tail, error) { return format.OpenTail(b, pt, rows) })
	return t
}

// block returns row group i decoded, from the cache or by decoding it.
func (t *tailState) block(i uint32) (*format.Batch, error) {
	return t.cache.get(i, func() (*format.Batch, error) {
		tl, err := t.open()
		if err != nil {
			return nil, err
		}
		return tl.Block(int(i))
	})
}

// coldBlock is Get's path for a series that is not hot: the decoded row
// group that holds it.
func (s *Snapshot) coldBlock(row uint32, r format.HotRecord) (*format.Batch, error) {
	x := s.index
	if r.Tier != format.Cold {
		return nil, fmt.Errorf("series %q: tier %d not supported by this build", x.ID(row), r.Tier)
	}
	if s.tail == nil {
		return nil, &format.CorruptionError{File: format.IndexFile, Offset: -1, Err: fmt.Errorf("series %q is cold but the snapshot has no %s", x.ID(row), format.TailFile)}
	}
	return s.tail.block(r.Batch)
}

// DropTailCache forgets every decoded cold block (blocks being decoded
// are still cached when done). Points already returned stay valid: they
// are ordinary Go memory.
func (s *Snapshot) DropTailCache() {
	if s.tail != nil {
		s.tail.cache.drop()
	}
}

// TailCacheStats reports the decoded blocks held and their bytes.
func (s *Snapshot) TailCacheStats() (blocks int, bytes int64) {
	if s.tail == nil {
		return 0, 0
	}
	c := &s.tail.cache
	c.mu.Lock()
	defer c.mu.Unlock()
	for e := c.lru.next; e != &c.lru; e = e.next {
		blocks++
	}
	return blocks, c.used
}

// blockCache is an LRU of decoded blocks bounded by their size. A decode
// runs outside the lock (only the map and list are guarded), so a slow
// decode blocks neither hot reads (which never come here) nor cached cold
// ones; concurrent readers of the same missing block wait for one decode.
type blockCache struct {
	mu     sync.Mutex
	budget int64
	used   int64
	m      map[uint32]*cacheEntry
	lru    cacheEntry // sentinel: lru.next is the most recently used
}

type cacheEntry struct {
	block      uint32
	b          *format.Batch // nil while decoding
	err        error
	size       int64
	done       chan struct{} // closed when b or err is set
	prev, next *cacheEntry   // nil while decoding
}

func (c *blockCache) get(i uint32, decode func() (*format.Batch, error)) (*format.Batch, error) {
	c.mu.Lock()
	if e := c.m[i]; e != nil {
		if e.b != nil {
			c.unlink(e)
			c.pushFront(e)
			c.mu.Unlock()
			return e.b, nil
		}
		c.mu.Unlock()
		<-e.done
		return e.b, e.err
	}
	e := &cacheEntry{block: i, done: make(chan struct{})}
	c.m[i] = e
	c.mu.Unlock()

	b, err := decode()

	c.mu.Lock()
	e.b, e.err = b, err
	if err != nil || c.budget < 0 {
		delete(c.m, i)
	} else {
		e.size = blockSize(b)
		c.used += e.size
		c.pushFront(e)
		// Evict from the back, never the block just decoded: one larger
		// than the budget is returned and goes at the next insert.
		for c.used > c.budget && c.lru.prev != e {
			old := c.lru.prev
			c.unlink(old)
			delete(c.m, old.block)
			c.used -= old.size
		}
	}
	c.mu.Unlock()
	close(e.done)
	return b, err
}

func (c *blockCache) drop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for e := c.lru.next; e != &c.lru; {
		next := e.next
		delete(c.m, e.block)
		e.prev, e.next = nil, nil
		e = next
	}
	c.lru.prev, c.lru.next = &c.lru, &c.lru
	c.used = 0
}

func (c *blockCache) pushFront(e *cacheEntry) {
	e.prev, e.next = &c.lru, c.lru.next
	c.lru.next.prev = e
	c.lru.next = e
}

func (c *blockCache) unlink(e *cacheEntry) {
	e.prev.next, e.next.prev = e.next, e.prev
	e.prev, e.next = nil, nil
}

func blockSize(b *format.Batch) int64 {
	return int64(len(b.Values))*8 + int64(len(b.Days))*4 + int64(len(b.Secs))*8 + 128
}
