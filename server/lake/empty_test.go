package lake

import (
	"context"
	"testing"

	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/localcache/snapshot"
)

// TestPublishEmptySnapshot: a snapshot whose series have no points (a
// dataset emptied) publishes as a vintage with no rows, over a vintage
// that had rows; iceberg-go's scan reads nothing and OpenSnapshot answers
// like the directory.
func TestPublishEmptySnapshot(t *testing.T) {
	ctx := context.Background()
	l := openLake(t, t.TempDir())
	mustPublish(t, l, "iowa", cookSample(t, "iowa", format.WriteOptions{}))
	empty := &format.Table{Series: []format.SeriesMeta{{ID: "A", Frequency: format.Daily}, {ID: "B", Frequency: format.Monthly}}}
	dir := writeSnapshot(t, "iowa", empty, format.WriteOptions{CoversThroughSeq: 2})
	v := mustPublish(t, l, "iowa", dir)
	tbl, _ := l.Table(ctx, "iowa")
	if rows := scanRows(t, tbl, v.IcebergSnapshot); len(rows) != 0 {
		t.Fatalf("scan of the empty vintage: %d rows", len(rows))
	}
	s, err := l.OpenSnapshot(ctx, "iowa", v, snapshot.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	sameAnswers(t, s, dir)
}
