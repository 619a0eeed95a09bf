package lake

import (
	"cmp"
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"time"

	"github.com/apache/iceberg-go/table"
)

// Vintage is one Iceberg snapshot of a dataset's table: every publish is
// one. Snapshot, Epoch and CoversSeq come from the snapshot summary;
// Serving is false for a commit without an energyscope serving index
// (another engine's write).
type Vintage struct {
	Snapshot        string    `json:"snapshot"`         // es snapshot id ("" for another engine's commit)
	IcebergSnapshot int64     `json:"iceberg_snapshot"` // Iceberg snapshot id
	CommittedAt     time.Time `json:"committed_at"`     // the Iceberg snapshot's timestamp, UTC
	CoversSeq       uint64    `json:"covers_seq"`
	Epoch           uint64    `json:"epoch"`
	Rows            int64     `json:"rows"`
	Tags            []string  `json:"tags,omitempty"`
	Serving         bool      `json:"serving"`               // has an energyscope serving index (statistics file)
	RollbackOf      int64     `json:"rollback_of,omitempty"` // the Iceberg snapshot a rollback restored
	Operation       string    `json:"operation,omitempty"`   // Iceberg operation (overwrite, append, ...)
	SequenceNumber  int64     `json:"sequence_number"`       // Iceberg sequence number (commit order)
}

// vintagesOf lists the table's retained snapshots, oldest first.
func vintagesOf(t *table.Table) []Vintage {
	md := t.Metadata()
	stats := map[int64]bool{}
	for sf := range md.Statistics() {
		stats[sf.SnapshotID] = true
	}
	tags := map[int64][]string{}
	for name, ref := range md.Refs() {
		if ref.SnapshotRefType == table.TagRef {
			tags[ref.SnapshotID] = append(tags[ref.SnapshotID], name)
		}
	}
	var out []Vintage
	for _, s := range md.Snapshots() {
		out = append(out, vintageOf(&s, stats[s.SnapshotID], tags[s.SnapshotID]))
	}
	slices.SortStableFunc(out, func(a, b Vintage) int {
		return cmp.Or(cmp.Compare(a.SequenceNumber, b.SequenceNumber), a.CommittedAt.Compare(b.CommittedAt))
	})
	return out
}

// vintageOf is one snapshot as a vintage; hasStats says whether a
// statistics file is registered for it.
func vintageOf(s *table.Snapshot, hasStats bool, tags []string) Vintage {
	v := Vintage{
		IcebergSnapshot: s.SnapshotID,
		CommittedAt:     time.UnixMilli(s.TimestampMs).UTC(),
		SequenceNumber:  s.SequenceNumber,
		Tags:            slices.Clone(tags),
	}
	slices.Sort(v.Tags)
	if s.Summary != nil {
		p := s.Summary.Properties
		v.Operation = string(s.Summary.Operation)
		v.Snapshot = p[SummarySnapshot]
		v.Epoch = parseUint(p, SummaryEpoch)
		v.CoversSeq = parseUint(p, SummaryCoversSeq)
		v.Rows = int64(parseUint(p, "total-records"))
		if id, err := strconv.ParseInt(p[SummaryRollbackOf], 10, 64); err == nil {
			v.RollbackOf = id
		}
	}
	v.Serving = v.Snapshot != "" && hasStats
	return v
}

// Vintages lists a dataset's retained vintages, oldest first, including
// commits of other engines (Serving false).
func (l *Lake) Vintages(ctx context.Context, dataset string) ([]Vintage, error) {
	t, err := l.load(ctx, dataset)
	if err != nil {
		return nil, err
	}
	return vintagesOf(t), nil
}

// Head is the table's current snapshot as a vintage, whoever wrote it;
// ErrUnknownVintage if the table has no snapshot yet.
func (l *Lake) Head(ctx context.Context, dataset string) (Vintage, error) {
	t, err := l.load(ctx, dataset)
	if err != nil {
		return Vintage{}, err
	}
	cur := t.CurrentSnapshot()
	if cur == nil {
		return Vintage{}, fmt.Errorf("%w: dataset %s has no snapshot yet", ErrUnknownVintage, dataset)
	}
	return vintageByID(t, cur.SnapshotID)
}

// vintageByID is the vintage of Iceberg snapshot id, without building
// the others (a lookup per open: linear in the table's snapshots, no
// summary copied but its own).
func vintageByID(t *table.Table, id int64) (Vintage, error) {
	_, hasStats := statisticsOf(t, id)
	return vintageWith(t, id, hasStats)
}

// vintageWith is vintageByID when whether id has a statistics file is
// known.
func vintageWith(t *table.Table, id int64, hasStats bool) (Vintage, error) {
	md := t.Metadata()
	s := md.SnapshotByID(id)
	if s == nil {
		return Vintage{}, fmt.Errorf("%w: iceberg snapshot %d", ErrUnknownVintage, id)
	}
	var tags []string
	for name, ref := range md.Refs() {
		if ref.SnapshotRefType == table.TagRef && ref.SnapshotID == id {
			tags = append(tags, name)
		}
	}
	return vintageOf(s, hasStats, tags), nil
}

// Current is the vintage a server serves: the newest vintage on the main
// branch's history that carries a serving index. If the head is another
// engine's commit, Current still answers with the vintage below it (the
// head is reported by Head, with Serving false; Extract refuses it with
// ErrNoServingIndex). ErrNoServingIndex if no vintage of the history has
// one; ErrUnknownVintage if the table is empty.
func (l *Lake) Current(ctx context.Context, dataset string) (Vintage, error) {
	t, err := l.load(ctx, dataset)
	if err != nil {
		return Vintage{}, err
	}
	return currentOf(t, dataset)
}

func currentOf(t *table.Table, dataset string) (Vintage, error) {
	cur := t.CurrentSnapshot()
	if cur == nil {
		return Vintage{}, fmt.Errorf("%w: dataset %s has no snapshot yet", ErrUnknownVintage, dataset)
	}
	byID := map[int64]Vintage{}
	for _, v := range vintagesOf(t) {
		byID[v.IcebergSnapshot] = v
	}
	for _, s := range table.AncestorsOf(cur.SnapshotID, t.Metadata().SnapshotByID) {
		if v := byID[s.SnapshotID]; v.Serving {
			return v, nil
		}
	}
	return Vintage{}, &NoServingIndexError{Dataset: dataset, IcebergSnapshot: cur.SnapshotID, Reason: "no vintage of the history has one"}
}

var (
	esSnapshotRE = regexp.MustCompile(`^e[0-9]+-s[0-9]+-[0-9a-f]{12}$`)
	dateRE       = regexp.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2}$`)
)

// Resolve finds the vintage WHEN names:
//
//   - an RFC 3339 time: the latest serving vintage committed at or before it;
//   - a date YYYY-MM-DD: the same at the end of that day, UTC (the latest
//     serving vintage committed on or before that day);
//   - an es snapshot id (e1-s0-3f2a9c0d1e4b): the latest vintage with that
//     id (a rollback re-publishes an older id);
//   - a tag name; or a decimal Iceberg snapshot id.
//
// A time before the first retained serving vintage is
// ErrBeforeFirstVintage; a name that matches nothing (or an expired
// vintage) is ErrUnknownVintage.
func (l *Lake) Resolve(ctx context.Context, dataset, when string) (Vintage, error) {
	t, err := l.load(ctx, dataset)
	if err != nil {
		return Vintage{}, err
	}
	return resolveIn(t, dataset, when)
}

func resolveIn(t *table.Table, dataset, when string) (Vintage, error) {
	if v, ok, err := ResolveListed(vintagesOf(t), dataset, when); ok {
		return v, err
	}
	for name, ref := range t.Metadata().Refs() {
		if name == when && ref.SnapshotRefType == table.TagRef {
			return vintageByID(t, ref.SnapshotID)
		}
	}
	if id, err := strconv.ParseInt(when, 10, 64); err == nil {
		if v, err := vintageByID(t, id); err == nil {
			return v, nil
		}
	}
	return Vintage{}, fmt.Errorf("%w: %q is not a time, date, snapshot id or tag of dataset %s", ErrUnknownVintage, when, dataset)
}

// ResolveListed applies the rules of Resolve that need only the history
// vs (vintages in commit order): a time or date, and an es snapshot id.
// ok is false when when is neither (a tag or an Iceberg snapshot id),
// which the caller resolves.
func ResolveListed(vs []Vintage, dataset, when string) (v Vintage, ok bool, err error) {
	if at, ok := ParseWhen(when); ok {
		var best *Vintage
		var first *Vintage
		for i := range vs {
			v := &vs[i]
			if !v.Serving {
				continue
			}
			if first == nil {
				first = v
			}
			if !v.CommittedAt.After(at) {
				best = v
			}
		}
		if best != nil {
			return *best, true, nil
		}
		if first == nil {
			return Vintage{}, true, fmt.Errorf("%w: dataset %s has no vintage", ErrUnknownVintage, dataset)
		}
		return Vintage{}, true, fmt.Errorf("%w: %s is before the first vintage of %s (%s, committed %s)",
			ErrBeforeFirstVintage, when, dataset, first.Snapshot, first.CommittedAt.Format(time.RFC3339))
	}
	if esSnapshotRE.MatchString(when) {
		for i := len(vs) - 1; i >= 0; i-- {
			if vs[i].Snapshot == when {
				return vs[i], true, nil
			}
		}
		return Vintage{}, true, fmt.Errorf("%w: no vintage %s in dataset %s (never published, or expired)", ErrUnknownVintage, when, dataset)
	}
	return Vintage{}, false, nil
}

// ParseWhen parses an RFC 3339 time or a date (end of that day, UTC), as
// Resolve reads WHEN.
func ParseWhen(s string) (time.Time, bool) {
	if dateRE.MatchString(s) {
		d, err := time.Parse(time.DateOnly, s)
		if err != nil {
			return time.Time{}, false
		}
		return d.Add(24*time.Hour - time.Nanosecond), true
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, true
	}
	return time.Time{}, false
}

// LoadedVintages lists dataset's retained vintages, oldest first, as the
// table this Lake loaded last has them (any call that read the catalog:
// Head, Current, Vintages, ...), without a catalog round trip; false if
// none was loaded. A server that polls the heads learns from it which
// vintages another server expired.
func (l *Lake) LoadedVintages(dataset string) ([]Vintage, bool) {
	l.tables.Lock()
	lt := l.tables.m[dataset]
	l.tables.Unlock()
	if lt == nil {
		return nil, false
	}
	return vintagesOf(lt.t), true
}
