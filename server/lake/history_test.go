package lake

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/iceberg-go/table"

	"github.com/energyscope/energyscope/localcache/format"
)

// referencedFiles is ReferencedFiles for a test: every file the table's
// metadata references, as local paths.
func referencedFiles(t testing.TB, tbl *table.Table) []string {
	t.Helper()
	out, err := ReferencedFiles(context.Background(), tbl)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// checkNoOrphans fails if the warehouse holds a file the metadata does
// not reference, or the metadata references a missing file.
func checkNoOrphans(t testing.TB, home string, tbls ...*table.Table) {
	t.Helper()
	var ref []string
	for _, tbl := range tbls {
		ref = append(ref, referencedFiles(t, tbl)...)
	}
	slices.Sort(ref)
	files := warehouseFiles(t, home)
	if !slices.Equal(files, ref) {
		var orphan, missing []string
		for _, f := range files {
			if !slices.Contains(ref, f) {
				orphan = append(orphan, f)
			}
		}
		for _, f := range ref {
			if !slices.Contains(files, f) {
				missing = append(missing, f)
			}
		}
		t.Fatalf("warehouse and metadata disagree:\norphans %v\nmissing %v", orphan, missing)
	}
}

// TestConcurrentPublishers: three publishers, each with its own Lake (own
// catalog connection, as three processes would), publish three snapshots
// each at once. Every commit lands, the history is linear (each
// snapshot's parent is the one before), every vintage has its own serving
// index, and the warehouse holds exactly the files the metadata
// references: the losing attempts left no orphan.
func TestConcurrentPublishers(t *testing.T) {
	ctx := context.Background()
	home := t.TempDir()
	tab := sampleTable(t, "stocks")
	const writers, each = 3, 3
	dirs := make([][]string, writers)
	for w := range writers {
		for i := range each {
			dirs[w] = append(dirs[w], writeSnapshot(t, "stocks", scaled(tab, float64(2+w*each+i)), format.WriteOptions{CoversThroughSeq: uint64(1 + w*each + i)}))
		}
	}
	// Create the table first so that the writers race on commits, not on
	// table creation.
	first := openLake(t, home)
	mustPublish(t, first, "stocks", cookSample(t, "stocks", format.WriteOptions{}))
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	start := make(chan struct{})
	lakes := make([]*Lake, writers)
	for w := range writers {
		l := openLake(t, home)
		lakes[w] = l
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for _, d := range dirs[w] {
				if _, err := l.Publish(ctx, "stocks", d); err != nil {
					errs <- fmt.Errorf("writer %d: %w", w, err)
				}
			}
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	vs, err := first.Vintages(ctx, "stocks")
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != 1+writers*each {
		t.Fatalf("%d vintages, want %d", len(vs), 1+writers*each)
	}
	tbl, _ := first.Table(ctx, "stocks")
	seen := map[string]bool{}
	for i, v := range vs {
		s := tbl.SnapshotByID(v.IcebergSnapshot)
		switch {
		case i == 0 && s.ParentSnapshotID != nil:
			t.Fatalf("first vintage has a parent")
		case i > 0 && (s.ParentSnapshotID == nil || *s.ParentSnapshotID != vs[i-1].IcebergSnapshot):
			t.Fatalf("vintage %d's parent is not vintage %d: history is not linear", i, i-1)
		}
		if !v.Serving || seen[v.Snapshot] {
			t.Fatalf("vintage %d: %+v (serving index missing or es id repeated)", i, v)
		}
		seen[v.Snapshot] = true
		if _, err := first.Artifacts(ctx, "stocks", v); err != nil {
			t.Fatal(err)
		}
	}
	for w := range writers {
		for _, d := range dirs[w] {
			m, _ := format.ReadManifest(d)
			if !seen[m.SnapshotID] {
				t.Fatalf("snapshot %s of writer %d did not land", m.SnapshotID, w)
			}
		}
	}
	if stats := slices.Collect(tbl.Metadata().Statistics()); len(stats) != len(vs) {
		t.Fatalf("%d statistics files for %d vintages", len(stats), len(vs))
	}
	checkNoOrphans(t, home, tbl)
	var m Metrics
	for _, l := range lakes {
		m.Commits += l.Metrics().Commits
		m.Conflicts += l.Metrics().Conflicts
		m.FilesCleaned += l.Metrics().FilesCleaned
	}
	if m.Commits != writers*each {
		t.Fatalf("metrics count %d commits, want %d", m.Commits, writers*each)
	}
	t.Logf("%d commits, %d lost races rebuilt, %d files of losing attempts deleted", m.Commits, m.Conflicts, m.FilesCleaned)
}

// TestLosingAttemptLeavesNothing: a publish whose pinned parent moved
// between staging and commit (another writer committed in between) is
// refused by the catalog; the attempt's manifests, manifest list and
// metadata file are deleted while its data and Puffin files (written once
// per publish) stay for the retry, which lands on the new parent with
// them; a publish that fails deletes those too.
func TestLosingAttemptLeavesNothing(t *testing.T) {
	ctx := context.Background()
	home := t.TempDir()
	l := openLake(t, home)
	other := openLake(t, home)
	tab := sampleTable(t, "iowa")
	mustPublish(t, l, "iowa", writeSnapshot(t, "iowa", tab, format.WriteOptions{}))
	dir := writeSnapshot(t, "iowa", scaled(tab, 2), format.WriteOptions{})
	src, err := readSnapshot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer src.close()
	base, _ := l.Table(ctx, "iowa")
	w, err := l.writeFiles(ctx, base, src)
	if err != nil {
		t.Fatal(err)
	}
	a, err := l.publishAttempt(ctx, base, src, w, PublishOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The other writer wins the race.
	mustPublish(t, other, "iowa", writeSnapshot(t, "iowa", scaled(tab, 3), format.WriteOptions{}))
	fresh, committed, err := l.commit(ctx, "iowa", base, a)
	if committed || err == nil || fresh == nil {
		t.Fatalf("commit on a moved parent: committed %v, err %v", committed, err)
	}
	if l.Metrics().FilesCleaned < 2 {
		t.Fatalf("cleaned %d files; a losing attempt writes at least a manifest and a manifest list", l.Metrics().FilesCleaned)
	}
	// Only the publish's own files are unreferenced now.
	for loc := range w.keep {
		if _, err := os.Stat(localPathOf(loc)); err != nil {
			t.Fatalf("the losing attempt deleted %s, which the retry needs: %v", loc, err)
		}
	}
	var extra []string
	for _, f := range warehouseFiles(t, home) {
		if !slices.Contains(referencedFiles(t, fresh), f) {
			extra = append(extra, f)
		}
	}
	if len(extra) != len(w.keep) {
		t.Fatalf("unreferenced after the lost race: %v, want only the publish's %d data and Puffin files", extra, len(w.keep))
	}
	// The retry on the new parent lands with the same files.
	a2, err := l.publishAttempt(ctx, fresh, src, w, PublishOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fresh2, committed, err := l.commit(ctx, "iowa", fresh, a2)
	if !committed || err != nil {
		t.Fatalf("retry: committed %v, %v", committed, err)
	}
	checkNoOrphans(t, home, fresh2)
	sameRows(t, "the retried publish", scanRows(t, fresh2, a2.snap.SnapshotID), snapshotRows(t, dir))
	// The full Publish retries and lands.
	v, err := l.Publish(ctx, "iowa", writeSnapshot(t, "iowa", scaled(tab, 4), format.WriteOptions{}))
	if err != nil {
		t.Fatal(err)
	}
	tbl, _ := l.Table(ctx, "iowa")
	if headID(tbl) != v.IcebergSnapshot {
		t.Fatal("publish after a lost race is not the head")
	}
	checkNoOrphans(t, home, tbl)
	// A publish that fails after writing its files (it loses the race and
	// may not retry) deletes them.
	l.opts.MaxRetries = 0
	var won Vintage
	l.beforeCommit = func() {
		won = mustPublish(t, other, "iowa", writeSnapshot(t, "iowa", scaled(tab, 6), format.WriteOptions{}))
	}
	_, err = l.Publish(ctx, "iowa", writeSnapshot(t, "iowa", scaled(tab, 5), format.WriteOptions{}))
	l.beforeCommit = nil
	if !errors.Is(err, ErrConflict) {
		t.Fatalf("publish that lost its only race: %v, want ErrConflict", err)
	}
	tbl, _ = l.Table(ctx, "iowa")
	if headID(tbl) != won.IcebergSnapshot {
		t.Fatal("the failed publish moved the head")
	}
	checkNoOrphans(t, home, tbl)
}

// foreignAppend appends rows to the dataset's table with iceberg-go
// directly, as another engine would: no serving index.
func foreignAppend(t *testing.T, l *Lake, dataset string) int64 {
	t.Helper()
	ctx := context.Background()
	tbl, err := l.Table(ctx, dataset)
	if err != nil {
		t.Fatal(err)
	}
	// Another engine's own Arrow schema: plain strings.
	str := arrow.BinaryTypes.String
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "series_id", Type: str}, {Name: "period", Type: arrow.FixedWidthTypes.Date32},
		{Name: "value", Type: arrow.PrimitiveTypes.Float64}, {Name: "frequency", Type: str},
		{Name: "unit", Type: str}, {Name: "name", Type: str}, {Name: "source", Type: str},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer b.Release()
	b.Field(0).(*array.StringBuilder).Append("FOREIGN")
	b.Field(1).(*array.Date32Builder).Append(arrow.Date32(20000))
	b.Field(2).(*array.Float64Builder).Append(42)
	for i := 3; i < 7; i++ {
		b.Field(i).(*array.StringBuilder).Append("")
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	at := array.NewTableFromRecords(sc, []arrow.RecordBatch{rec})
	defer at.Release()
	nt, err := tbl.AppendTable(ctx, at, 1024, nil)
	if err != nil {
		t.Fatal(err)
	}
	return nt.CurrentSnapshot().SnapshotID
}

// TestForeignAppend: another engine appends to the table with iceberg-go
// directly. Current still answers with the previous serving vintage, Head
// reports the foreign commit (Serving false), Extract and Artifacts refuse
// it with a NoServingIndexError naming the snapshot, and the next publish
// replaces the contents again.
func TestForeignAppend(t *testing.T) {
	ctx := context.Background()
	home := t.TempDir()
	l := openLake(t, home)
	tab := sampleTable(t, "iowa")
	v1 := mustPublish(t, l, "iowa", writeSnapshot(t, "iowa", tab, format.WriteOptions{}))
	foreign := foreignAppend(t, l, "iowa")

	cur, err := l.Current(ctx, "iowa")
	if err != nil || cur.IcebergSnapshot != v1.IcebergSnapshot {
		t.Fatalf("current after a foreign append: %+v, %v; want the previous vintage %d", cur, err, v1.IcebergSnapshot)
	}
	head, err := l.Head(ctx, "iowa")
	if err != nil || head.IcebergSnapshot != foreign || head.Serving || head.Snapshot != "" {
		t.Fatalf("head: %+v, %v; want the foreign snapshot %d without a serving index", head, err, foreign)
	}
	_, err = l.Extract(ctx, "iowa", head, filepath.Join(t.TempDir(), "x"))
	var ne *NoServingIndexError
	if !errors.As(err, &ne) || !errors.Is(err, ErrNoServingIndex) || ne.IcebergSnapshot != foreign || !strings.Contains(err.Error(), fmt.Sprint(foreign)) {
		t.Fatalf("extract of the foreign snapshot: %v, want a NoServingIndexError naming %d", err, foreign)
	}
	if _, err := l.Artifacts(ctx, "iowa", head); !errors.Is(err, ErrNoServingIndex) {
		t.Fatalf("artifacts of the foreign snapshot: %v", err)
	}
	if v, err := l.Resolve(ctx, "iowa", time.Now().UTC().Format(time.RFC3339Nano)); err != nil || v.IcebergSnapshot != v1.IcebergSnapshot {
		t.Fatalf("as-of now: %+v, %v; want the serving vintage", v, err)
	}
	// The serving reader of the extracted current vintage is unaffected.
	dst := filepath.Join(t.TempDir(), "cur")
	if _, err := l.Extract(ctx, "iowa", cur, dst); err != nil {
		t.Fatal(err)
	}
	// The next publish replaces the contents, the foreign row included.
	dir2 := writeSnapshot(t, "iowa", scaled(tab, 2), format.WriteOptions{})
	v2 := mustPublish(t, l, "iowa", dir2)
	tbl, _ := l.Table(ctx, "iowa")
	sameRows(t, "after the foreign append", scanRows(t, tbl, v2.IcebergSnapshot), snapshotRows(t, dir2))
	checkNoOrphans(t, home, tbl)
}

// TestResolve: as-of by time, date, es snapshot id, tag and Iceberg id,
// and bad input.
func TestResolve(t *testing.T) {
	ctx := context.Background()
	l := openLake(t, t.TempDir())
	tab := sampleTable(t, "iowa")
	var vs []Vintage
	for i := range 3 {
		vs = append(vs, mustPublish(t, l, "iowa", writeSnapshot(t, "iowa", scaled(tab, float64(i+1)), format.WriteOptions{CoversThroughSeq: uint64(i)})))
		time.Sleep(5 * time.Millisecond) // distinct commit milliseconds
	}
	if err := l.Tag(ctx, "iowa", vs[0], "release-1"); err != nil {
		t.Fatal(err)
	}
	rfc := func(tm time.Time) string { return tm.Format(time.RFC3339Nano) }
	day := vs[2].CommittedAt.Format(time.DateOnly)
	for _, c := range []struct {
		when string
		want int // index in vs, or -1 for an error
		err  error
	}{
		{rfc(vs[0].CommittedAt), 0, nil},
		{rfc(vs[1].CommittedAt), 1, nil},
		{rfc(vs[1].CommittedAt.Add(time.Millisecond / 2)), 1, nil},
		{rfc(vs[2].CommittedAt.Add(time.Hour)), 2, nil},
		{rfc(vs[2].CommittedAt.In(time.FixedZone("X", 5*3600))), 2, nil},
		{day, 2, nil},
		{vs[1].Snapshot, 1, nil},
		{"release-1", 0, nil},
		{fmt.Sprint(vs[1].IcebergSnapshot), 1, nil},
		{rfc(vs[0].CommittedAt.Add(-time.Millisecond)), -1, ErrBeforeFirstVintage},
		{"1999-12-31", -1, ErrBeforeFirstVintage},
		{"e9-s9-000000000000", -1, ErrUnknownVintage},
		{"no-such-tag", -1, ErrUnknownVintage},
		{"12345", -1, ErrUnknownVintage},
		{"2026-13-45", -1, ErrUnknownVintage},
		{"", -1, ErrUnknownVintage},
	} {
		t.Run(c.when, func(t *testing.T) {
			v, err := l.Resolve(ctx, "iowa", c.when)
			if c.want < 0 {
				if !errors.Is(err, c.err) {
					t.Fatalf("resolve %q: %+v, %v; want %v", c.when, v, err, c.err)
				}
				return
			}
			if err != nil || v.IcebergSnapshot != vs[c.want].IcebergSnapshot {
				t.Fatalf("resolve %q: %+v, %v; want vintage %d", c.when, v, err, c.want)
			}
		})
	}
	if _, err := l.Resolve(ctx, "nosuch", "2026-01-01"); !errors.Is(err, ErrNoDataset) {
		t.Fatalf("resolve on an unknown dataset: %v", err)
	}
}
