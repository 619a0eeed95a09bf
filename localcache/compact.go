package localcache

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"runtime/debug"
	"slices"
	"sort"

	"github.com/energyscope/energyscope/localcache/delta"
	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/localcache/snapshot"
)

// Compact folds the dataset's delta into a new snapshot written with the
// cook's code (format.WriteSorted, which writes what format.Write would),
// publishes it beside the old one, moves CURRENT, swaps the read state,
// then drops the write-ahead log segments the new snapshot covers. If any
// step up to moving CURRENT fails, the call fails and the old state keeps
// serving. Apply keeps working while the snapshot
// is written; readers are never blocked. With nothing pending it returns
// the current manifest and does nothing. The same base and delta always
// give byte-identical data, index and hash files.
func (s *Store) Compact(dataset string) (*format.Manifest, error) {
	return s.CompactThrough(dataset, ^uint64(0))
}

// CompactThrough is Compact folding only the records with seq <= upTo
// (records above stay pending). A companion uses it to rebuild exactly the
// server's snapshot that covers upTo and compare SHA-256s.
func (s *Store) CompactThrough(dataset string, upTo uint64) (*format.Manifest, error) {
	return s.CompactThroughVersion(dataset, upTo, 0)
}

// CompactThroughVersion is CompactThrough writing format version version
// (0: Options.FormatVersion). A companion rebasing onto a server's
// snapshot writes that snapshot's version, so an older server's
// compaction is reproduced byte for byte. A version this build does not
// write fails with ErrFormatVersion before anything is touched. With
// nothing pending it returns the current manifest whatever its version.
func (s *Store) CompactThroughVersion(dataset string, upTo uint64, version int) (*format.Manifest, error) {
	if version == 0 {
		version = s.opts.FormatVersion
	}
	if version != 0 && (version < format.MinFormatVersion || version > format.FormatVersion) {
		return nil, fmt.Errorf("compact %s: format version %d is not %d..%d: %w", dataset, version, format.MinFormatVersion, format.FormatVersion, ErrFormatVersion)
	}
	d, err := s.writable(dataset)
	if err != nil {
		return nil, err
	}
	d.cmu.Lock()
	defer d.cmu.Unlock()

	// Freeze what to fold: everything applied so far (seq <= upTo).
	d.mu.Lock()
	rs := d.cur.Load()
	if rs == nil || !rs.snap.TryRef() {
		d.mu.Unlock()
		return nil, ErrClosed
	}
	defer rs.snap.Unref()
	pending, last := rs.delta.Snapshot()
	if upTo >= last {
		upTo = last
	} else {
		// Fold only a prefix: rebuild the pending series from it.
		partial := delta.New(rs.snap, rs.snap.Manifest.CoversThroughSeq)
		recs := rs.delta.Records(rs.snap.Manifest.CoversThroughSeq)
		n := sort.Search(len(recs), func(i int) bool { return recs[i].Seq > upTo })
		partial.Apply(recs[:n])
		pending, _ = partial.Snapshot()
		if n > 0 {
			upTo = recs[n-1].Seq
		}
	}
	if upTo < rs.snap.Manifest.CoversThroughSeq {
		d.mu.Unlock()
		return nil, fmt.Errorf("compact %s: seq %d is below the snapshot's %d", dataset, upTo, rs.snap.Manifest.CoversThroughSeq)
	}
	if len(pending) == 0 {
		d.mu.Unlock()
		m := *rs.snap.Manifest
		return &m, nil
	}
	// Records from here on go to a new segment, so the old ones can be
	// deleted whole once the new snapshot is in place.
	err = s.walReadyLocked(d, rs)
	if err == nil {
		err = d.mu.wal.Rotate(last + 1) // records in (upTo, last] stay in the older segment
	}
	d.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("compact %s: rotate write-ahead log: %w", dataset, err)
	}

	base := rs.snap.Manifest
	o := format.WriteOptions{Dataset: dataset, Epoch: base.Epoch, CoversThroughSeq: upTo, Version: version}
	// fold writes the fold with sorted (the base's columns copied and the
	// pending series merged in, which spares Write's sort) or, for a base
	// not in the form Write gives (its points out of order or not
	// normalized to its series' frequency, as in a snapshot written by an
	// older build), with plain from scratch. It reads every byte of the
	// base's mappings: a fault there marks the dataset damaged.
	fold := func(sorted func(*format.SortedTable) (*format.Manifest, error), plain func(*format.Table) (*format.Manifest, error)) (m *format.Manifest, err error) {
		r := reading{d: d}
		defer s.guard(debug.SetPanicOnFault(true), &r, &err)
		defer func() { err = s.damagedIf(d, err) }()
		f := newFolding(rs.snap, pending)
		st, err := f.sorted()
		if err != nil {
			return nil, err
		}
		m, err = sorted(st)
		if errors.Is(err, format.ErrNotSorted) {
			s.opts.Logger.Warn("compaction: snapshot columns not in sorted form; rewriting from scratch", "dataset", dataset, "err", err)
			t, ferr := f.table()
			if ferr != nil {
				return nil, ferr
			}
			m, err = plain(t)
		}
		return m, err
	}
	var m *format.Manifest
	if s.opts.CookPublish != nil {
		// Cooked straight to where it is published: no directory here.
		m, err = s.opts.CookPublish(dataset, func(c *format.Container) (*format.Manifest, error) {
			return fold(func(st *format.SortedTable) (*format.Manifest, error) {
				m, _, err := format.WriteSortedInto(c, st, o)
				return m, err
			}, func(t *format.Table) (*format.Manifest, error) {
				m, _, err := format.WriteInto(c, t, o)
				return m, err
			})
		})
		if err != nil {
			return nil, fmt.Errorf("compact %s: publish: %w", dataset, err)
		}
	} else {
		var created bool
		m, created, err = s.writeSnapshot(d, func(dir string) (*format.Manifest, error) {
			return fold(func(st *format.SortedTable) (*format.Manifest, error) {
				m, _, err := format.WriteSorted(dir, st, o)
				return m, err
			}, func(t *format.Table) (*format.Manifest, error) {
				m, _, err := format.Write(dir, t, o)
				return m, err
			})
		})
		if err != nil {
			return nil, fmt.Errorf("compact %s: %w", dataset, err)
		}
		if err := s.publishPlaced(d, m, created); err != nil {
			return nil, fmt.Errorf("compact %s: %w", dataset, err)
		}
	}
	if err := s.installPublished(d, m, false); err != nil {
		return nil, fmt.Errorf("compact %s: %w", dataset, err)
	}
	return m, nil
}

// writeSnapshot writes a snapshot into a temporary directory and renames it into
// snapshots/<id> (CURRENT is not touched); created as placeSnapshot.
func (s *Store) writeSnapshot(d *Dataset, write func(dir string) (*format.Manifest, error)) (*format.Manifest, bool, error) {
	tmp, err := format.TempSnapshotDir(d.dir)
	if err != nil {
		return nil, false, err
	}
	m, err := write(tmp)
	if err != nil {
		return nil, false, err
	}
	created, err := placeSnapshot(d.dir, tmp, m.SnapshotID)
	if err != nil {
		os.RemoveAll(tmp)
		return nil, false, err
	}
	return m, created, nil
}

// folding is the one fold of compaction: base + pending, series by
// series in id order (the index's order), each base series with its
// pending points merged in and its metadata overridden by the delta's
// latest, and each series only the delta has at its place. sorted feeds
// it to a format.SortedTable for WriteSorted (the base's columns copied
// as they are), table to a format.Table for Write (which sorts and
// normalizes: for a base not in that form). Both give the same rows.
type folding struct {
	snap    *snapshot.Snapshot
	pending map[string]*delta.Series
	added   []string // series only the delta has, sorted
	rows    int      // a hint: base rows + pending points
}

func newFolding(snap *snapshot.Snapshot, pending map[string]*delta.Series) *folding {
	f := &folding{snap: snap, pending: pending, rows: int(snap.Manifest.Rows)}
	for _, id := range slices.Sorted(maps.Keys(pending)) {
		f.rows += len(pending[id].Points)
		if _, ok := snap.Lookup(id); !ok {
			f.added = append(f.added, id)
		}
	}
	return f
}

// each hands every series of the fold to add, in id order. A base series
// that cannot be read (a corrupt cold-tier block) fails the fold: dropping
// its points would lose data.
func (f *folding) each(add func(meta format.SeriesMeta, pts snapshot.Points)) error {
	addNew := func(id string) {
		p := f.pending[id]
		meta := format.SeriesMeta{ID: id, Frequency: p.Freq}
		overrideMeta(&meta, p)
		add(meta, mergePoints(snapshot.Points{}, p.Points))
	}
	n := uint32(f.snap.NumSeries())
	next := 0 // into added
	for row := uint32(0); row < n; row++ {
		in := f.snap.Info(row)
		for next < len(f.added) && f.added[next] < in.ID {
			addNew(f.added[next])
			next++
		}
		pts, freq, err := f.snap.GetFrequency(row, snapshot.MinTime, snapshot.MaxTime)
		if err != nil {
			return fmt.Errorf("read series %q of snapshot %s: %w", in.ID, f.snap.ID(), err)
		}
		meta := format.SeriesMeta{ID: in.ID, Name: in.Name, Unit: in.Unit, Source: in.Source, Frequency: freq, Tier: in.Tier}
		if p := f.pending[in.ID]; p != nil {
			overrideMeta(&meta, p)
			pts = mergePoints(pts, p.Points)
		}
		add(meta, pts)
	}
	for ; next < len(f.added); next++ {
		addNew(f.added[next])
	}
	return nil
}

// numSeries is the number of series of the fold.
func (f *folding) numSeries() int { return f.snap.NumSeries() + len(f.added) }

// sorted is the fold as a format.SortedTable. Its period type is what
// Write would choose: timestamps if and only if a series is intraday.
func (f *folding) sorted() (*format.SortedTable, error) {
	pt := format.PeriodDate32
	for row := uint32(0); row < uint32(f.snap.NumSeries()) && pt == format.PeriodDate32; row++ {
		if f.snap.Frequency(row).Intraday() {
			pt = format.PeriodTimestamp
		}
	}
	for _, id := range f.added {
		if f.pending[id].Freq.Intraday() {
			pt = format.PeriodTimestamp
		}
	}
	t := format.NewSortedTable(pt, f.numSeries(), f.rows)
	err := f.each(func(meta format.SeriesMeta, pts snapshot.Points) {
		t.AddSeries(meta)
		if pts.Secs != nil {
			t.AppendSecs(pts.Secs, pts.Values)
		} else {
			t.AppendDays(pts.Days, pts.Values)
		}
	})
	return t, err
}

// table is the fold as a format.Table, for Write.
func (f *folding) table() (*format.Table, error) {
	t := &format.Table{
		Series:    make([]format.SeriesMeta, 0, f.numSeries()),
		SeriesIdx: make([]uint32, 0, f.rows),
		Period:    make([]int64, 0, f.rows),
		Value:     make([]float64, 0, f.rows),
	}
	err := f.each(func(meta format.SeriesMeta, pts snapshot.Points) {
		si := uint32(len(t.Series))
		t.Series = append(t.Series, meta)
		for i := 0; i < pts.Len(); i++ {
			t.SeriesIdx = append(t.SeriesIdx, si)
			t.Period = append(t.Period, pts.Unix(i))
		}
		t.Value = append(t.Value, pts.Values...)
	})
	return t, err
}

// overrideMeta gives meta the delta's latest name, unit and source, if
// the delta has any.
func overrideMeta(meta *format.SeriesMeta, p *delta.Series) {
	if p.Meta != nil {
		meta.Name, meta.Unit, meta.Source = p.Meta.Name, p.Meta.Unit, p.Meta.Source
	}
}
