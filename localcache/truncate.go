package localcache

import (
	"fmt"
	"sort"

	"github.com/energyscope/energyscope/localcache/delta"
)

// Truncate durably drops every delta record of the dataset with seq >
// through and returns how many it dropped. A companion calls it when the
// server lost records it had acknowledged (the server's head is below the
// local seq): the records above the server's head exist nowhere else and
// would be served forever.
//
// Records at or below through and the snapshot stay; the dataset's last
// seq becomes that of the last record kept (or the snapshot's
// covers_through_seq). Readers see the old state or the new one, never a
// mix, and so does a restart after a crash: the write-ahead log is
// replaced whole (see delta.WAL.Replace). With nothing above through it
// does nothing. When through is below the snapshot's covers_through_seq
// it changes nothing and returns an error wrapping ErrBelowSnapshot.
func (s *Store) Truncate(dataset string, through uint64) (int, error) {
	d, err := s.writable(dataset)
	if err != nil {
		return 0, err
	}
	// No compaction may fold the records being dropped meanwhile.
	d.cmu.Lock()
	defer d.cmu.Unlock()
	rs, err := d.lockWrite()
	if err != nil {
		return 0, err
	}
	last := rs.delta.LastSeq()
	if through >= last {
		d.mu.Unlock()
		return 0, nil
	}
	covers := rs.snap.Manifest.CoversThroughSeq
	if through < covers {
		d.mu.Unlock()
		return 0, fmt.Errorf("truncate %s through seq %d: %w (snapshot %s covers through %d)", dataset, through, ErrBelowSnapshot, rs.snap.ID(), covers)
	}
	recs := rs.delta.Records(covers)
	n := sort.Search(len(recs), func(i int) bool { return recs[i].Seq > through })
	keep := recs[:n]
	if err := s.walReadyLocked(d, rs); err != nil {
		d.mu.Unlock()
		return 0, fmt.Errorf("truncate %s through seq %d: %w", dataset, through, err)
	}
	if err := d.mu.wal.Replace(keep, through+1); err != nil {
		d.mu.Unlock()
		return 0, fmt.Errorf("truncate %s through seq %d: %w", dataset, through, err)
	}
	dl := delta.New(rs.snap, covers)
	if _, err := s.applyGuarded(d, dl, keep); err != nil {
		d.mu.Unlock()
		return 0, err
	}
	d.swap(&readState{snap: rs.snap, delta: dl}) // the same snapshot: its reference carries over
	d.mu.Unlock()
	s.notify(dataset, nil) // the dropped records' series changed
	return len(recs) - n, nil
}
