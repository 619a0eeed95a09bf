package client_test

import (
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/energyscope/energyscope/sync/client"
)

// copyTree copies a closed server's home (a backup).
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		in, err := os.Open(p)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.Create(to)
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, in); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestResetDropsRecordsTheServerLost: the server is restored from a
// backup (same epoch, same snapshot) taken before records the companion
// had already applied. On reconnect the server answers reset with its
// head; the companion drops its records above it, catches up from there
// and ends with exactly the server's data, and then follows it live
// (new records reuse the lost seqs with other values).
func TestResetDropsRecordsTheServerLost(t *testing.T) {
	home := t.TempDir()
	r := startRig(t, home, nil)
	if _, err := r.srv.Replace("stocks", []string{stocks}, stocksOpts); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		r.ingest(row("T", i, float64(i)))
	}
	snap, _, _ := r.srv.Head("stocks")
	r.close()
	backup := t.TempDir()
	copyTree(t, home, backup)

	// Seqs 4..6 reach the companion, then the server loses them.
	r = startRig(t, home, nil)
	r.ingest(row("T", 0, 100)) // revises a value the backup has
	r.ingest(row("T", 10, 110))
	r.ingest(row("U", 0, 120)) // a series the backup does not have
	st := openCompStore(t, t.TempDir())
	c := startComp(t, st, nil, client.Options{Server: r.hs.URL})
	c.waitState(snap.Snapshot, 6, 20*time.Second)
	c.stop()
	r.close()
	if _, err := st.Info("U"); err != nil {
		t.Fatalf("companion before the loss lacks U: %v", err)
	}

	r = startRig(t, backup, nil)
	if h, _, _ := r.srv.Head("stocks"); h.Seq != 3 || h.Snapshot != snap.Snapshot {
		t.Fatalf("restored server at %s seq %d, want %s seq 3", h.Snapshot, h.Seq, snap.Snapshot)
	}
	c = startComp(t, st, nil, client.Options{Server: r.hs.URL})
	waitFor(t, 20*time.Second, "companion back at the server's seq 3", func() bool {
		q, err := st.LastSeq("stocks")
		return err == nil && q == 3
	})
	waitFor(t, 20*time.Second, "companion live", func() bool {
		p := c.eng.Progress()
		return len(p.Datasets) == 1 && p.Datasets[0].State == client.StateLive
	})
	sameAsServer(t, r.srv, st, "T")
	if _, err := st.Info("U"); err == nil {
		t.Fatal("series U, which only the lost records had, is still served")
	}
	if m := c.eng.Metrics(); m.Resets != 1 || m.ResetDiscarded != 3 {
		t.Fatalf("%d resets discarded %d records, want 1 discarding 3", m.Resets, m.ResetDiscarded)
	}
	if n := c.eng.Stats.DownloadRebases.Load(); n != 0 {
		t.Fatalf("%d downloads; the snapshot is the same, none needed", n)
	}

	// New records take the lost seqs with other values, live.
	r.ingest(row("T", 0, 200))
	last := r.ingest(row("U", 1, 210))
	c.waitState(snap.Snapshot, last, 20*time.Second)
	sameAsServer(t, r.srv, st, "T", "U")
	if q, _ := st.LastSeq("stocks"); q != 5 {
		t.Fatalf("companion at seq %d, want 5", q)
	}
	c.stop()
}
