package lake

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/energyscope/energyscope/localcache/format"
)

// TestPublishOverArbitrates: three publishers (each its own Lake, as three
// replicas) publish a compaction of the same vintage at once, each pinned
// to it (PublishOptions.Over). Exactly one lands; the others fail with
// ErrHeadMoved, commit nothing and leave no file behind; a publish over a
// parent that is no longer the head fails at once. A plain Publish still
// rebuilds on a moved head.
func TestPublishOverArbitrates(t *testing.T) {
	ctx := context.Background()
	home := t.TempDir()
	tab := sampleTable(t, "stocks")
	first := openLake(t, home)
	base := mustPublish(t, first, "stocks", cookSample(t, "stocks", format.WriteOptions{}))
	const writers = 3
	dirs := make([]string, writers)
	for w := range writers {
		dirs[w] = writeSnapshot(t, "stocks", scaled(tab, float64(2+w)), format.WriteOptions{CoversThroughSeq: 5})
	}
	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make([]error, writers)
	for w := range writers {
		l := openLake(t, home)
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, errs[w] = l.PublishWith(ctx, "stocks", dirs[w], PublishOptions{Over: base.IcebergSnapshot})
		}()
	}
	close(start)
	wg.Wait()
	won := 0
	for w, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, ErrHeadMoved):
			t.Fatalf("writer %d: %v, want nil or ErrHeadMoved", w, err)
		}
	}
	if won != 1 {
		t.Fatalf("%d of %d pinned publishes landed (%v), want exactly 1", won, writers, errs)
	}
	vs, err := first.Vintages(ctx, "stocks")
	if err != nil || len(vs) != 2 {
		t.Fatalf("%d vintages (%v), want the base and one compaction", len(vs), err)
	}
	tbl, err := first.Table(ctx, "stocks")
	if err != nil {
		t.Fatal(err)
	}
	checkNoOrphans(t, home, tbl)

	// Over a parent that is no longer the head: refused before a commit.
	late := writeSnapshot(t, "stocks", scaled(tab, 9), format.WriteOptions{CoversThroughSeq: 6})
	if _, err := first.PublishWith(ctx, "stocks", late, PublishOptions{Over: base.IcebergSnapshot}); !errors.Is(err, ErrHeadMoved) {
		t.Fatalf("publish over a stale parent: %v, want ErrHeadMoved", err)
	}
	tbl, _ = first.Table(ctx, "stocks")
	checkNoOrphans(t, home, tbl)
	// Publish (not pinned) lands on whatever the head is.
	if v := mustPublish(t, first, "stocks", late); v.CoversSeq != 6 {
		t.Fatalf("plain publish: %+v", v)
	}
}
