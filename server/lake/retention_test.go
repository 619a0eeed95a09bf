package lake

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/energyscope/energyscope/localcache/format"
)

// TestRollback: rolling back to an older vintage is one new commit whose
// rows (iceberg-go's scan) and serving index are the older vintage's; the
// history stays linear, Current names the older es snapshot again, and a
// rollback to the current vintage commits nothing.
func TestRollback(t *testing.T) {
	ctx := context.Background()
	home := t.TempDir()
	l := openLake(t, home)
	tab := sampleTable(t, "stocks")
	dir1 := writeSnapshot(t, "stocks", tab, format.WriteOptions{CoversThroughSeq: 1})
	v1 := mustPublish(t, l, "stocks", dir1)
	v2 := mustPublish(t, l, "stocks", writeSnapshot(t, "stocks", scaled(tab, 2), format.WriteOptions{CoversThroughSeq: 2}))

	rb, err := l.Rollback(ctx, "stocks", v1)
	if err != nil {
		t.Fatal(err)
	}
	if rb.IcebergSnapshot == v1.IcebergSnapshot || rb.IcebergSnapshot == v2.IcebergSnapshot {
		t.Fatalf("rollback did not make a new snapshot: %+v", rb)
	}
	if rb.Snapshot != v1.Snapshot || rb.Epoch != v1.Epoch || rb.CoversSeq != v1.CoversSeq || rb.RollbackOf != v1.IcebergSnapshot || !rb.Serving {
		t.Fatalf("rollback vintage %+v, want v1's keys %+v", rb, v1)
	}
	cur, err := l.Current(ctx, "stocks")
	if err != nil || cur.IcebergSnapshot != rb.IcebergSnapshot {
		t.Fatalf("current %+v, %v; want the rollback %d", cur, err, rb.IcebergSnapshot)
	}
	tbl, _ := l.Table(ctx, "stocks")
	if p := tbl.CurrentSnapshot().ParentSnapshotID; p == nil || *p != v2.IcebergSnapshot {
		t.Fatal("the rollback's parent is not the previous head: history is not linear")
	}
	sameRows(t, "rolled back", scanRows(t, tbl, rb.IcebergSnapshot), snapshotRows(t, dir1))
	dst := filepath.Join(t.TempDir(), "rb")
	if _, err := l.Extract(ctx, "stocks", rb, dst); err != nil {
		t.Fatal(err)
	}
	sameRows(t, "rolled back, extracted", snapshotRows(t, dst), snapshotRows(t, dir1))
	if v, err := l.Resolve(ctx, "stocks", v1.Snapshot); err != nil || v.IcebergSnapshot != rb.IcebergSnapshot {
		t.Fatalf("resolve %s after the rollback: %+v, %v; want the newest vintage with that id", v1.Snapshot, v, err)
	}
	// A rollback to what is current commits nothing.
	again, err := l.Rollback(ctx, "stocks", v1)
	if err != nil || again.IcebergSnapshot != rb.IcebergSnapshot {
		t.Fatalf("second rollback: %+v, %v; want a no-op", again, err)
	}
	if vs, _ := l.Vintages(ctx, "stocks"); len(vs) != 3 {
		t.Fatalf("%d vintages, want 3", len(vs))
	}
	checkNoOrphans(t, home, tbl)
}

// TestTagExpireRollbackToExpired: with five vintages, a tag on the first
// and Expire(keep 2), the tagged, the current and the previous survive;
// the others disappear with their Puffin files and data files, nothing
// the survivors reference is deleted, a rollback to an expired vintage is
// ErrUnknownVintage and changes nothing, and a rollback to the tagged one
// still works after its own data were superseded.
func TestTagExpireRollbackToExpired(t *testing.T) {
	ctx := context.Background()
	home := t.TempDir()
	l := openLake(t, home)
	tab := sampleTable(t, "iowa")
	var vs []Vintage
	var dirs []string
	for i := range 5 {
		d := writeSnapshot(t, "iowa", scaled(tab, float64(i+1)), format.WriteOptions{CoversThroughSeq: uint64(i)})
		dirs = append(dirs, d)
		vs = append(vs, mustPublish(t, l, "iowa", d))
	}
	if err := l.Tag(ctx, "iowa", vs[0], "first"); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"first", "main", "e1-s0-000000000000", "1bad", ""} {
		if err := l.Tag(ctx, "iowa", vs[1], bad); !errors.Is(err, ErrBadTag) {
			t.Fatalf("tag %q: %v, want ErrBadTag", bad, err)
		}
	}
	tbl, _ := l.Table(ctx, "iowa")
	puffins := map[int64]string{}
	for sf := range tbl.Metadata().Statistics() {
		puffins[sf.SnapshotID] = localPathOf(sf.StatisticsPath)
	}

	res, err := l.Expire(ctx, "iowa", 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Expired) != 2 || res.Expired[0].IcebergSnapshot != vs[1].IcebergSnapshot || res.Expired[1].IcebergSnapshot != vs[2].IcebergSnapshot {
		t.Fatalf("expired %+v, want vintages 1 and 2", res.Expired)
	}
	left, _ := l.Vintages(ctx, "iowa")
	var ids []int64
	for _, v := range left {
		ids = append(ids, v.IcebergSnapshot)
	}
	if len(left) != 3 || ids[0] != vs[0].IcebergSnapshot || ids[1] != vs[3].IcebergSnapshot || ids[2] != vs[4].IcebergSnapshot {
		t.Fatalf("kept %v, want the tagged first and the last two", ids)
	}
	if len(left[0].Tags) != 1 || left[0].Tags[0] != "first" {
		t.Fatalf("tags of the first vintage: %v", left[0].Tags)
	}
	for i, v := range vs {
		_, err := os.Stat(puffins[v.IcebergSnapshot])
		if gone := i == 1 || i == 2; gone != os.IsNotExist(err) {
			t.Errorf("vintage %d's Puffin file: stat %v (expired: %v)", i, err, gone)
		}
	}
	tbl, _ = l.Table(ctx, "iowa")
	checkNoOrphans(t, home, tbl)
	sameRows(t, "tagged vintage after expiry", scanRows(t, tbl, vs[0].IcebergSnapshot), snapshotRows(t, dirs[0]))

	before := warehouseFiles(t, home)
	_, err = l.Rollback(ctx, "iowa", vs[1])
	if !errors.Is(err, ErrUnknownVintage) {
		t.Fatalf("rollback to an expired vintage: %v, want ErrUnknownVintage", err)
	}
	if after := warehouseFiles(t, home); len(after) != len(before) {
		t.Fatal("a refused rollback changed the warehouse")
	}
	if _, err := l.Resolve(ctx, "iowa", vs[1].Snapshot); !errors.Is(err, ErrUnknownVintage) {
		t.Fatalf("resolve of an expired vintage: %v", err)
	}
	rb, err := l.Rollback(ctx, "iowa", vs[0])
	if err != nil {
		t.Fatal(err)
	}
	tbl, _ = l.Table(ctx, "iowa")
	sameRows(t, "rollback to the tagged vintage", scanRows(t, tbl, rb.IcebergSnapshot), snapshotRows(t, dirs[0]))

	// Expiring everything but the head keeps the rollback's shared files
	// (v0's data and Puffin file) and the tag.
	if _, err := l.Expire(ctx, "iowa", 1, 0); err != nil {
		t.Fatal(err)
	}
	tbl, _ = l.Table(ctx, "iowa")
	checkNoOrphans(t, home, tbl)
	if _, err := l.Extract(ctx, "iowa", rb, filepath.Join(t.TempDir(), "x")); err != nil {
		t.Fatalf("extract of the rollback after expiry: %v", err)
	}
	if _, err := l.Expire(ctx, "iowa", 0, 0); err == nil {
		t.Fatal("expire keeping 0 vintages succeeded")
	}
}
