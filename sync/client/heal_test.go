package client_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/energyscope/energyscope/localcache"
	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/sync/client"
)

// TestDamagedDatasetIsDownloadedAgain: a companion's data.arrow is
// truncated underneath it (a disk error, a stray tool). The next lookup
// marks the dataset damaged instead of killing the process; the engine
// notices, downloads the server's snapshot again and installs it over the
// damaged one, while the other dataset keeps serving throughout, and the
// healed dataset then follows live deltas again.
func TestDamagedDatasetIsDownloadedAgain(t *testing.T) {
	r := newStocksRig(t, nil)
	other := stocksOpts
	other.Prefix = "other."
	if _, err := r.srv.Replace("other", []string{stocks}, other); err != nil {
		t.Fatal(err)
	}
	st := openCompStore(t, t.TempDir())
	c := startComp(t, st, nil, client.Options{Server: r.hs.URL})
	head, _, _ := r.srv.Head("stocks")
	waitFor(t, 20*time.Second, "both datasets live", func() bool {
		a, ok1 := progressOf(c.eng, "stocks")
		b, ok2 := progressOf(c.eng, "other")
		return ok1 && ok2 && a.State == client.StateLive && b.State == client.StateLive
	})
	msft := func() ([]float64, error) {
		_, v, err := st.Copy("stocks:MSFT", -1<<62, 1<<62)
		return v, err
	}
	want, err := msft()
	if err != nil || len(want) == 0 {
		t.Fatalf("MSFT before the damage: %v %v", want, err)
	}
	if _, _, err := st.Copy("other:other.MSFT", -1<<62, 1<<62); err != nil {
		t.Fatal(err)
	}

	data := filepath.Join(st.DatasetDir("stocks"), format.SnapshotsDir, head.Snapshot, format.DataFile)
	if err := os.Truncate(data, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := msft(); !errors.Is(err, localcache.ErrDamaged) {
		t.Fatalf("lookup in the truncated dataset: %v, want ErrDamaged", err)
	}
	healed := time.Now()
	waitFor(t, 30*time.Second, "the damaged dataset downloaded again and serving", func() bool {
		if _, _, err := st.Copy("other:other.MSFT", -1<<62, 1<<62); err != nil {
			t.Fatalf("the other dataset stopped serving while stocks was damaged: %v", err)
		}
		v, err := msft()
		return err == nil && slices.Equal(v, want)
	})
	t.Logf("healed in %v", time.Since(healed).Round(time.Millisecond))
	if err := st.Damaged("stocks"); err != nil {
		t.Fatalf("still damaged: %v", err)
	}
	if n := c.eng.Stats.Heals.Load(); n != 1 {
		t.Errorf("%d heals, want 1", n)
	}
	last := r.ingest(row("T", 0, 7))
	c.waitState(head.Snapshot, last, 20*time.Second)
	sameAsServer(t, r.srv, st, "T", "MSFT")
}
