package localcache_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/energyscope/energyscope/localcache"
	"github.com/energyscope/energyscope/localcache/format"
)

// TestCloseDuringRefreshDoesNotDeadlock closes a read-only store while
// another goroutine refreshes it onto a snapshot another writer just
// published (CURRENT flipping between two snapshots): Close must return.
func TestCloseDuringRefreshDoesNotDeadlock(t *testing.T) {
	home := t.TempDir()
	tb := &format.Table{Series: []format.SeriesMeta{{ID: "A", Frequency: format.Daily}}}
	for i := range 2000 {
		tb.Append(0, utc("2020-01-01")+int64(i)*86400, float64(i))
	}
	_, dirA := publish(t, home, "ds", tb, format.WriteOptions{Epoch: 1, CoversThroughSeq: 1})
	_, dirB := publish(t, home, "ds", tb, format.WriteOptions{Epoch: 1, CoversThroughSeq: 2})
	dsDir := filepath.Join(home, localcache.DatasetsDir, "ds")
	ids := []string{filepath.Base(dirA), filepath.Base(dirB)}
	for round := range 200 {
		s, err := localcache.Open(home, &localcache.Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if err := format.WriteCurrent(dsDir, ids[i%2]); err != nil {
					t.Error(err)
					return
				}
				s.Refresh()
			}
		}()
		time.Sleep(time.Duration(round%5) * time.Millisecond)
		closed := make(chan error, 1)
		go func() { closed <- s.Close() }()
		select {
		case <-closed:
		case <-time.After(20 * time.Second):
			t.Fatalf("round %d: Close did not return while a Refresh ran (lock-order deadlock)", round)
		}
		close(stop)
		<-done
	}
}
