package client_test

import (
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/energyscope/energyscope/internal/testhome"
	"github.com/energyscope/energyscope/localcache"
	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/server"
	"github.com/energyscope/energyscope/sync/client"
)

// TestOlderFormatSnapshotSyncs: a server serving a format version 2
// snapshot (ids read from index.arrow) and a companion of this build
// (which writes version 3): the companion downloads and installs the
// version 2 snapshot as it is and serves it; after an ingest and a
// server compaction (version 3) it follows by a local rebase to the
// server's new snapshot, byte for byte (FORMAT.md "Compatibility").
func TestOlderFormatSnapshotSyncs(t *testing.T) {
	home := t.TempDir()
	m := testhome.Publish(t, home, "stocks", testhome.RandomTable(20_000), format.WriteOptions{Epoch: 1, Version: 2})
	if m.Version != 2 {
		t.Fatalf("published version %d", m.Version)
	}
	r := startRig(t, home, nil)
	st := openCompStore(t, t.TempDir())
	c := startComp(t, st, nil, client.Options{Server: r.hs.URL})
	c.waitState(m.SnapshotID, 0, 30*time.Second)
	if v := snapVersion(t, st, m.SnapshotID); v != 2 {
		t.Fatalf("companion holds format version %d, want the server's 2", v)
	}
	sameAsServer(t, r.srv, st, "S00000", "S00999", "S01999")

	last := r.ingest(row("S00007", 3, 1.5))
	c.waitState(m.SnapshotID, last, 20*time.Second)
	nm, err := r.srv.Compact("stocks")
	if err != nil {
		t.Fatal(err)
	}
	if nm.Version != format.FormatVersion {
		t.Fatalf("server compacted to version %d", nm.Version)
	}
	c.waitState(nm.SnapshotID, last, 30*time.Second)
	if v := snapVersion(t, st, nm.SnapshotID); v != format.FormatVersion {
		t.Fatalf("companion holds format version %d after the rebase", v)
	}
	waitFor(t, 20*time.Second, "the local rebase to be counted", func() bool { return c.eng.Stats.LocalRebases.Load() >= 1 })
	if c.eng.Stats.LocalRebases.Load() != 1 || c.eng.Metrics().CompactionMismatches != 0 {
		t.Fatalf("%d local rebases, %d mismatches: want the version 3 compaction reproduced locally", c.eng.Stats.LocalRebases.Load(), c.eng.Metrics().CompactionMismatches)
	}
	sameAsServer(t, r.srv, st, "S00000", "S00007", "S01999")
}

// TestOlderServerCompactionRebasesLocally (review 6 F6): a server whose
// compactions still write an older format version (2, or 4: the version
// before this build's; a fleet not yet upgraded:
// server.Options.FormatVersion) and a companion of this build. After an
// ingest and a server compaction the companion folds its records into a
// snapshot of that version, the server's byte for byte: a local rebase,
// no mismatch and no download. (Before, the companion's fold wrote its own
// version, its SHA-256s differed and it downloaded every server
// compaction.)
func TestOlderServerCompactionRebasesLocally(t *testing.T) {
	for _, version := range []int{2, format.FormatVersion - 1} {
		t.Run(fmt.Sprintf("v%d", version), func(t *testing.T) { olderServerRebase(t, version) })
	}
}

func olderServerRebase(t *testing.T, version int) {
	home := t.TempDir()
	m := testhome.Publish(t, home, "stocks", testhome.RandomTable(20_000), format.WriteOptions{Epoch: 1, Version: version})
	r := &rig{t: t, home: home, log: &logBuf{}}
	r.log.dumpOnFailure(t, "server "+home)
	var err error
	r.srv, err = server.New(server.Options{Home: home, Logger: r.log.logger(), CompactRows: -1, CompactBytes: -1, FormatVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	r.hs = httptest.NewServer(r.srv.Handler())
	t.Cleanup(r.close)

	st := openCompStore(t, t.TempDir())
	c := startComp(t, st, nil, client.Options{Server: r.hs.URL})
	c.waitState(m.SnapshotID, 0, 30*time.Second)
	last := r.ingest(row("S00007", 3, 1.5), row("S01234", 9, -2))
	c.waitState(m.SnapshotID, last, 20*time.Second)
	nm, err := r.srv.Compact("stocks")
	if err != nil {
		t.Fatal(err)
	}
	if nm.Version != version {
		t.Fatalf("server compacted to version %d, want %d", nm.Version, version)
	}
	c.waitState(nm.SnapshotID, last, 30*time.Second)
	waitFor(t, 20*time.Second, "the rebase to be counted", func() bool {
		return c.eng.Stats.LocalRebases.Load()+c.eng.Metrics().CompactionMismatches >= 1
	})
	if n, mm := c.eng.Stats.LocalRebases.Load(), c.eng.Metrics().CompactionMismatches; n != 1 || mm != 0 {
		t.Fatalf("%d local rebases, %d mismatches: want the version %d compaction reproduced locally", n, mm, version)
	}
	if v := snapVersion(t, st, nm.SnapshotID); v != version {
		t.Fatalf("companion holds format version %d after the rebase, want the server's %d", v, version)
	}
	sameAsServer(t, r.srv, st, "S00000", "S00007", "S01234", "S01999")
}

func snapVersion(t *testing.T, st *localcache.Store, id string) int {
	t.Helper()
	m, err := format.ReadManifest(filepath.Join(st.Home(), localcache.DatasetsDir, "stocks", format.SnapshotsDir, id))
	if err != nil {
		t.Fatal(err)
	}
	return m.Version
}
