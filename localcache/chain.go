package localcache

import "github.com/energyscope/energyscope/localcache/format"

// Pending returns what a companion's history chain is computed over: the
// snapshot in service of a dataset, the seq it covers through, and the
// delta records applied on top of it, in seq order (a copy). The three
// belong to one read state, so they are consistent with each other.
func (s *Store) Pending(dataset string) (snapshotID string, covers uint64, recs []format.Record, err error) {
	d, err := s.Dataset(dataset)
	if err != nil {
		return "", 0, nil, err
	}
	rs, err := d.acquire()
	if err != nil {
		return "", 0, nil, err
	}
	defer rs.snap.Unref()
	covers = rs.snap.Manifest.CoversThroughSeq
	return rs.snap.ID(), covers, rs.delta.Records(covers), nil
}
