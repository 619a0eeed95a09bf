package localcache

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/localcache/snapshot"
)

// Background scrub
//
// Open checks sizes and headers, not every byte: hashing a multi-GiB
// snapshot would delay every start. So a writable store runs one
// low-priority goroutine that re-reads each snapshot it puts in service
// (at open, after Install or compaction), chunk by chunk with plain reads
// (never through the mapping, so a shrunk file is a short read, not a
// fault), at a limited rate (Options.ScrubBytesPerSec), and compares each
// 4 MiB chunk's SHA-256 with the manifest. A snapshot that fails while
// it is still in service marks its dataset damaged. Close cancels it.

// DefaultScrubBytesPerSec is the scrub's read rate when Options leave it 0.
const DefaultScrubBytesPerSec = 8 << 20

// scrubPiece is how much the scrub reads between two rate-limit checks.
const scrubPiece = 256 << 10

// Metrics are counters of a store's damage handling, for /metrics and the
// app's status. Values are totals since Open.
type Metrics struct {
	DatasetsDamaged int64 // datasets marked damaged (by open, fault or scrub)
	Faults          int64 // memory faults on a mapping recovered by a lookup
	ScrubBytes      int64 // bytes the scrub has read and hashed
	ScrubSnapshots  int64 // snapshots scrubbed completely and found intact
	ScrubFailures   int64 // snapshots the scrub found damaged
	ScrubPending    int64 // snapshots waiting for (or in) the scrub now
}

type storeMetrics struct {
	damaged, faults                                       atomic.Int64
	scrubBytes, scrubSnapshots, scrubFailures, scrubQueue atomic.Int64
}

// Metrics returns the store's counters.
func (s *Store) Metrics() Metrics {
	m := &s.metrics
	return Metrics{
		DatasetsDamaged: m.damaged.Load(),
		Faults:          m.faults.Load(),
		ScrubBytes:      m.scrubBytes.Load(),
		ScrubSnapshots:  m.scrubSnapshots.Load(),
		ScrubFailures:   m.scrubFailures.Load(),
		ScrubPending:    m.scrubQueue.Load(),
	}
}

// scrubJob is a snapshot to scrub. It holds no reference: the scrub reads
// the files by name (snap.Dir, its regions and snap.Manifest stay valid
// after release)
// and marks the dataset only if snap is still in service.
type scrubJob struct {
	d    *Dataset
	snap *snapshot.Snapshot
}

// scrubber is the scrub goroutine and its queue.
type scrubber struct {
	s      *Store
	rate   int64
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}

	mu    sync.Mutex // guards queue
	queue []scrubJob
	wake  chan struct{} // buffered 1
}

func (s *Store) startScrub() {
	if s.opts.ReadOnly || s.opts.ScrubBytesPerSec < 0 {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	sc := &scrubber{s: s, rate: s.opts.ScrubBytesPerSec, ctx: ctx, cancel: cancel,
		done: make(chan struct{}), wake: make(chan struct{}, 1)}
	s.scrub = sc
	go sc.run()
}

// scrubLater queues snap (just put in service for d) for the scrub.
func (s *Store) scrubLater(d *Dataset, snap *snapshot.Snapshot) {
	sc := s.scrub
	if sc == nil {
		return
	}
	sc.mu.Lock()
	sc.queue = append(sc.queue, scrubJob{d, snap})
	sc.mu.Unlock()
	s.metrics.scrubQueue.Add(1)
	select {
	case sc.wake <- struct{}{}:
	default:
	}
}

// stop cancels the scrub, waits for it and drops the queue.
func (sc *scrubber) stop() {
	sc.cancel()
	<-sc.done
	sc.mu.Lock()
	n := len(sc.queue)
	sc.queue = nil
	sc.mu.Unlock()
	sc.s.metrics.scrubQueue.Add(-int64(n))
}

func (sc *scrubber) run() {
	defer close(sc.done)
	for {
		sc.mu.Lock()
		var j scrubJob
		ok := len(sc.queue) > 0
		if ok {
			j = sc.queue[0]
			sc.queue = sc.queue[1:]
		}
		sc.mu.Unlock()
		if !ok {
			select {
			case <-sc.ctx.Done():
				return
			case <-sc.wake:
				continue
			}
		}
		err := sc.check(j.snap)
		s := sc.s
		if errors.Is(err, errScrubSkipped) {
			s.opts.Logger.Warn("scrub could not read a snapshot", "dataset", j.d.name, "snapshot", j.snap.ID(), "err", err)
		} else if err != nil && !errors.Is(err, context.Canceled) {
			s.metrics.scrubFailures.Add(1)
			j.d.mu.Lock()
			if cur := j.d.cur.Load(); cur != nil && cur.snap == j.snap {
				s.markDamaged(j.d, fmt.Errorf("scrub of snapshot %s: %w", j.snap.ID(), err))
			}
			j.d.mu.Unlock()
		} else if err == nil {
			s.metrics.scrubSnapshots.Add(1)
		}
		s.metrics.scrubQueue.Add(-1)
		if sc.ctx.Err() != nil {
			return
		}
	}
}

// check re-reads every file of snap and compares it with the manifest's
// chunk hashes. It returns a *format.CorruptionError for damage and
// context.Canceled when the store closes.
func (sc *scrubber) check(snap *snapshot.Snapshot) error {
	buf := make([]byte, scrubPiece)
	start := time.Now()
	var read int64
	for _, fi := range snap.Manifest.Files {
		// A directory's file, or the region of another file that holds it
		// (a lake's Puffin file, Options.OpenSnapshot), read with pread
		// rather than through the mapping (no fault can reach the scrub).
		path, region := filepath.Join(snap.Dir, fi.Name), snapshot.Region{}
		inRegion := snap.Dir == ""
		if inRegion {
			var ok bool
			if region, ok = snap.Region(fi.Name); !ok {
				return fmt.Errorf("%w: %s: no directory and no region", errScrubSkipped, fi.Name)
			}
			path = region.Path
		}
		f, err := os.Open(path)
		if err != nil {
			// Not proof of damage (the directory may be gone while the
			// mapping serves, or a permission changed): no verdict.
			return fmt.Errorf("%w: %v", errScrubSkipped, err)
		}
		var r io.Reader = f
		if inRegion {
			r = io.NewSectionReader(f, region.Offset, region.Length)
		}
		err = func() error {
			defer f.Close()
			h := sha256.New()
			var off int64
			for chunk := 0; off < fi.Size; chunk++ {
				n := min(int64(format.ChunkSize), fi.Size-off)
				h.Reset()
				for done := int64(0); done < n; {
					k := min(int64(len(buf)), n-done)
					got, err := io.ReadFull(r, buf[:k])
					if err != nil {
						return &format.CorruptionError{File: fi.Name, Offset: off + done + int64(got),
							Err: fmt.Errorf("shorter than the manifest's %d bytes: %w", fi.Size, err)}
					}
					h.Write(buf[:k])
					done += k
					read += k
					sc.s.metrics.scrubBytes.Add(k)
					if err := sc.pace(start, read); err != nil {
						return err
					}
				}
				if chunk >= len(fi.Chunks) || hex.EncodeToString(h.Sum(nil)) != fi.Chunks[chunk] {
					return &format.CorruptionError{File: fi.Name, Offset: off, Err: fmt.Errorf("chunk %d hash disagrees with the manifest", chunk)}
				}
				off += n
			}
			if fi.Size > 0 && len(fi.Chunks) != int((fi.Size+format.ChunkSize-1)/format.ChunkSize) {
				return &format.CorruptionError{File: fi.Name, Offset: -1, Err: fmt.Errorf("%d chunk hashes for %d bytes", len(fi.Chunks), fi.Size)}
			}
			// A region's length is the manifest's (checked at open); a
			// directory's file may have grown.
			if inRegion {
				return nil
			}
			if _, err := f.Read(buf[:1]); err != io.EOF {
				return &format.CorruptionError{File: fi.Name, Offset: fi.Size, Err: errors.New("longer than the manifest says")}
			}
			return nil
		}()
		if err != nil {
			return err
		}
	}
	return nil
}

// pace sleeps so that read bytes since start stay within the rate, and
// returns context.Canceled once the store closes.
func (sc *scrubber) pace(start time.Time, read int64) error {
	if err := sc.ctx.Err(); err != nil {
		return err
	}
	due := time.Duration(float64(read) / float64(sc.rate) * float64(time.Second))
	wait := due - time.Since(start)
	if wait <= 0 {
		return nil
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-sc.ctx.Done():
		return sc.ctx.Err()
	case <-t.C:
		return nil
	}
}
