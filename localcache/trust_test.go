package localcache

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/energyscope/energyscope/localcache/delta"
	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/localcache/snapshot"
)

// trustTable is a dataset of n daily series "<prefix>0".."<prefix>n-1",
// 400 points each, value v + series.
func trustTable(prefix string, n int, v float64) *format.Table {
	tb := &format.Table{}
	for s := range n {
		tb.Series = append(tb.Series, format.SeriesMeta{ID: fmt.Sprintf("%s%d", prefix, s), Frequency: format.Daily})
		for p := range 400 {
			tb.Append(uint32(s), liveDay("2024-01-01")+int64(p)*86400, v+float64(s))
		}
	}
	return tb
}

// trustWantServes checks that ref serves n points whose first value is v.
func trustWantServes(t *testing.T, s *Store, ref string, v float64) {
	t.Helper()
	per, vals, err := s.Copy(ref, snapshot.MinTime, snapshot.MaxTime)
	if err != nil || len(per) != 400 || vals[0] != v {
		t.Fatalf("%s: %d points, %v; want 400 points from %v", ref, len(per), err, v)
	}
}

func trustSnapDir(home, ds string, m *format.Manifest) string {
	return filepath.Join(home, DatasetsDir, ds, format.SnapshotsDir, m.SnapshotID)
}

// A damaged dataset never takes the home down: Open succeeds, the healthy
// dataset serves (by qualified and plain id), the damaged one is reported
// with a typed reason and refuses lookups with ErrDamaged, and installing
// a good snapshot over it heals it (issue 10, item 8 a and d).
func TestTrustDamagedDatasetIsContained(t *testing.T) {
	for _, c := range []struct {
		name   string
		damage func(t *testing.T, home string, m *format.Manifest)
		file   string
	}{
		{"data.arrow truncated", func(t *testing.T, home string, m *format.Manifest) {
			liveTruncate(t, filepath.Join(trustSnapDir(home, "bad", m), format.DataFile), -100)
		}, format.DataFile},
		{"index.hash flipped", func(t *testing.T, home string, m *format.Manifest) {
			flipByte(t, filepath.Join(trustSnapDir(home, "bad", m), format.HashFile), 0)
		}, format.HashFile},
		{"manifest missing", func(t *testing.T, home string, m *format.Manifest) {
			os.Remove(filepath.Join(trustSnapDir(home, "bad", m), format.ManifestFile))
		}, format.ManifestFile},
		{"CURRENT garbage", func(t *testing.T, home string, m *format.Manifest) {
			os.WriteFile(filepath.Join(home, DatasetsDir, "bad", format.CurrentFile), []byte("../x\n"), 0o644)
		}, format.CurrentFile},
	} {
		t.Run(c.name, func(t *testing.T) {
			home := liveTempDir(t)
			liveCook(t, home, "good", trustTable("G", 3, 10), format.WriteOptions{Epoch: 1})
			mb := liveCook(t, home, "bad", trustTable("B", 3, 20), format.WriteOptions{Epoch: 1})
			spare := liveCopyDir(t, trustSnapDir(home, "bad", mb))
			c.damage(t, home, mb)

			s, err := Open(home, &Options{ScrubBytesPerSec: -1})
			if err != nil {
				t.Fatalf("one damaged dataset failed the whole home: %v", err)
			}
			defer s.Close()
			trustWantServes(t, s, "good:G1", 11)
			trustWantServes(t, s, "G2", 12)
			err = s.Damaged("bad")
			var de *DamageError
			var ce *format.CorruptionError
			if !errors.As(err, &de) || de.Dataset != "bad" || !errors.As(err, &ce) || ce.File != c.file {
				t.Fatalf("Damaged(bad) = %v, want a DamageError with a CorruptionError naming %s", err, c.file)
			}
			if err := s.Damaged("good"); err != nil {
				t.Fatalf("Damaged(good) = %v", err)
			}
			if _, _, err := s.Copy("bad:B1", snapshot.MinTime, snapshot.MaxTime); !errors.Is(err, ErrDamaged) {
				t.Fatalf("lookup in the damaged dataset: %v, want ErrDamaged", err)
			}
			if _, err := s.Info("B1"); !errors.Is(err, ErrNotFound) || !errors.Is(err, ErrDamaged) {
				t.Fatalf("plain lookup of a series only the damaged dataset has: %v, want ErrNotFound and ErrDamaged", err)
			}
			st, err := s.Status()
			if err != nil || len(st) != 2 || st[0].Name != "bad" || st[0].Health != Damaged || st[0].Err == nil || st[1].Health != Healthy {
				t.Fatalf("Status = %+v, %v", st, err)
			}
			if names := s.DamagedNames(); len(names) != 1 || names[0] != "bad" {
				t.Fatalf("DamagedNames = %v", names)
			}
			// Healing: the same snapshot, downloaded again.
			if _, err := s.Install("bad", spare); err != nil {
				t.Fatalf("install over the damaged dataset: %v", err)
			}
			if err := s.Damaged("bad"); err != nil {
				t.Fatalf("still damaged after the install: %v", err)
			}
			trustWantServes(t, s, "bad:B1", 21)
			s.Close()
			s2 := liveOpen(t, home, &Options{ScrubBytesPerSec: -1})
			defer s2.Close()
			if err := s2.Damaged("bad"); err != nil {
				t.Fatalf("damaged after a restart: %v", err)
			}
			trustWantServes(t, s2, "B1", 21)
		})
	}
}

// A mapped file truncated under a running store must not kill the process
// (SIGBUS): the lookup fails with a CorruptionError, the dataset is marked
// damaged, others keep serving, and an install heals it (item 8 b).
func TestTrustTruncatedMappingDoesNotCrash(t *testing.T) {
	for _, file := range []string{format.DataFile, format.HashFile, format.IndexFile} {
		t.Run(file, func(t *testing.T) {
			home := liveTempDir(t)
			liveCook(t, home, "good", trustTable("G", 3, 10), format.WriteOptions{Epoch: 1})
			mb := liveCook(t, home, "bad", trustTable("B", 50, 20), format.WriteOptions{Epoch: 1})
			spare := liveCopyDir(t, trustSnapDir(home, "bad", mb))
			s := liveOpen(t, home, &Options{ScrubBytesPerSec: -1})
			defer s.Close()
			trustWantServes(t, s, "bad:B7", 27)
			if err := os.Truncate(filepath.Join(trustSnapDir(home, "bad", mb), file), 0); err != nil {
				t.Fatal(err)
			}
			for _, ref := range []string{"bad:B7", "bad:B8", "B9"} {
				if file == format.IndexFile {
					// A lookup reads no byte of index.arrow (format
					// version 3: the ids are in index.hash's records);
					// Info reads its columns.
					if _, err := s.Info(ref); !errors.Is(err, ErrDamaged) {
						t.Fatalf("Info(%s) from a truncated %s: %v, want ErrDamaged", ref, file, err)
					}
				}
				_, _, err := s.Copy(ref, snapshot.MinTime, snapshot.MaxTime)
				if err == nil {
					t.Fatalf("%s served from a truncated %s", ref, file)
				}
				if !errors.Is(err, ErrDamaged) {
					t.Fatalf("%s: %v, want ErrDamaged", ref, err)
				}
			}
			var ce *format.CorruptionError
			if err := s.Damaged("bad"); !errors.As(err, &ce) {
				t.Fatalf("Damaged(bad) = %v, want a CorruptionError", err)
			}
			if m := s.Metrics(); m.Faults < 1 || m.DatasetsDamaged != 1 {
				t.Fatalf("metrics %+v: want a fault and one damaged dataset", m)
			}
			trustWantServes(t, s, "good:G1", 11)
			// Get and Info are guarded the same way.
			if _, err := s.Info("bad:B3"); !errors.Is(err, ErrDamaged) {
				t.Fatalf("Info: %v", err)
			}
			if _, err := s.Install("bad", spare); err != nil {
				t.Fatalf("install over the damaged dataset: %v", err)
			}
			trustWantServes(t, s, "bad:B7", 27)
		})
	}
}

// The background scrub re-hashes a snapshot in service and marks its
// dataset damaged when a byte flipped on disk (item 8 c); Close stops it.
func TestTrustScrubFindsFlippedByte(t *testing.T) {
	home := liveTempDir(t)
	liveCook(t, home, "good", trustTable("G", 3, 10), format.WriteOptions{Epoch: 1})
	mb := liveCook(t, home, "bad", trustTable("B", 3, 20), format.WriteOptions{Epoch: 1})
	// Flip a value byte in the middle of data.arrow before the scrub runs:
	// same size, so Open's checks pass and only the hashes can tell.
	path := filepath.Join(trustSnapDir(home, "bad", mb), format.DataFile)
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	flipByte(t, path, st.Size()/2)
	s := liveOpen(t, home, &Options{ScrubBytesPerSec: 64 << 20})
	defer s.Close()
	deadline := time.Now().Add(20 * time.Second)
	for s.Damaged("bad") == nil && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	var ce *format.CorruptionError
	if err := s.Damaged("bad"); !errors.As(err, &ce) || ce.File != format.DataFile {
		t.Fatalf("after the scrub: Damaged(bad) = %v, want a CorruptionError naming %s", err, format.DataFile)
	}
	for s.Metrics().ScrubPending > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	m := s.Metrics()
	if m.ScrubFailures != 1 || m.ScrubSnapshots != 1 || m.ScrubBytes == 0 {
		t.Fatalf("metrics %+v: want one failure, one intact snapshot", m)
	}
	if err := s.Damaged("good"); err != nil {
		t.Fatal(err)
	}
}

// A slow scrub is cancelled by Close (it must not hold Close for the
// seconds the rate limit asks for).
func TestTrustScrubStopsOnClose(t *testing.T) {
	home := liveTempDir(t)
	liveCook(t, home, "ds", trustTable("A", 200, 1), format.WriteOptions{Epoch: 1})
	s := liveOpen(t, home, &Options{ScrubBytesPerSec: 1024}) // minutes for this snapshot
	time.Sleep(50 * time.Millisecond)
	done := make(chan error, 1)
	go func() { done <- s.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close waited for the scrub")
	}
}

// Concurrent installs of a dataset that does not exist yet (twenty PUTs of
// a new dataset) must not share temporary names or sweep each other's
// temporary directories: every install succeeds, CURRENT names a complete
// snapshot, nothing temporary is left, and the home reopens (issue 10,
// item 2).
func TestTrustConcurrentInstallsOfNewDataset(t *testing.T) {
	const n = 12
	srcs := make([]string, n)
	for i := range srcs {
		src := liveTempDir(t)
		m := liveCook(t, src, "new", trustTable("N", 20+i, float64(100*i)), format.WriteOptions{Epoch: 1})
		srcs[i] = trustSnapDir(src, "new", m)
	}
	for round := range 10 {
		home := liveTempDir(t)
		liveCook(t, home, "other", trustTable("O", 2, 1), format.WriteOptions{Epoch: 1})
		s := liveOpen(t, home, &Options{ScrubBytesPerSec: -1})
		errs := make(chan error, n)
		start := make(chan struct{})
		for i := range n {
			go func() {
				<-start
				_, err := s.Install("new", srcs[i])
				errs <- err
			}()
		}
		close(start)
		for range n {
			if err := <-errs; err != nil {
				t.Errorf("round %d: concurrent install: %v", round, err)
			}
		}
		if t.Failed() {
			s.Close()
			t.FailNow()
		}
		st, err := s.Status()
		if err != nil || len(st) != 2 {
			t.Fatalf("round %d: status %+v, %v", round, st, err)
		}
		s.Close()
		dsDir := filepath.Join(home, DatasetsDir, "new")
		id, err := format.ReadCurrent(dsDir)
		if err != nil {
			t.Fatalf("round %d: CURRENT: %v", round, err)
		}
		if _, err := format.Verify(filepath.Join(dsDir, format.SnapshotsDir, id)); err != nil {
			t.Fatalf("round %d: CURRENT names %s: %v", round, id, err)
		}
		ents, _ := os.ReadDir(filepath.Join(dsDir, format.SnapshotsDir))
		for _, e := range ents {
			if e.Name()[0] == '.' {
				t.Fatalf("round %d: left %s", round, e.Name())
			}
		}
		ents, _ = os.ReadDir(dsDir)
		for _, e := range ents {
			if e.Name()[0] == '.' || len(e.Name()) > len(format.CurrentFile) && e.Name()[:len(format.CurrentFile)] == format.CurrentFile {
				t.Fatalf("round %d: left %s", round, e.Name())
			}
		}
		// A restart serves it.
		s2, err := Open(home, &Options{ScrubBytesPerSec: -1})
		if err != nil {
			t.Fatalf("round %d: reopen: %v", round, err)
		}
		st, err = s2.Status()
		s2.Close()
		if err != nil || len(st) != 2 || st[0].Name != "new" || st[0].Manifest.SnapshotID != id {
			t.Fatalf("round %d: after reopen %+v, %v", round, st, err)
		}
	}
}

// What a crash leaves while installing (a temporary snapshot directory, a
// temporary CURRENT, a snapshot placed but not yet named by CURRENT) is
// swept or ignored at the next open, which serves the last complete
// snapshot.
func TestTrustReopenAfterInterruptedInstall(t *testing.T) {
	home := liveTempDir(t)
	m1 := liveCook(t, home, "ds", trustTable("A", 3, 1), format.WriteOptions{Epoch: 1})
	src := liveTempDir(t)
	m2 := liveCook(t, src, "ds", trustTable("A", 3, 2), format.WriteOptions{Epoch: 2})
	dsDir := filepath.Join(home, DatasetsDir, "ds")
	// Placed but CURRENT not moved; plus temporaries of a dead writer.
	if err := os.CopyFS(filepath.Join(dsDir, format.SnapshotsDir, m2.SnapshotID), os.DirFS(trustSnapDir(src, "ds", m2))); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(dsDir, format.SnapshotsDir, format.TempPrefix+"dead", "x"), 0o755)
	os.WriteFile(filepath.Join(dsDir, "."+format.CurrentFile+".123.tmp"), []byte(m2.SnapshotID), 0o644)
	s := liveOpen(t, home, &Options{ScrubBytesPerSec: -1})
	defer s.Close()
	if _, id, _, err := s.State("ds"); err != nil || id != m1.SnapshotID {
		t.Fatalf("serving %s, %v; want %s", id, err, m1.SnapshotID)
	}
	trustWantServes(t, s, "A1", 2)
	for _, p := range []string{filepath.Join(dsDir, format.SnapshotsDir, format.TempPrefix+"dead"), filepath.Join(dsDir, "."+format.CurrentFile+".123.tmp")} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s not swept: %v", p, err)
		}
	}
}

// trustRecs is two upserts at seqs first, first+1: A0's first day to 999
// and a new series Z.
func trustRecs(first uint64) []format.Record {
	day := liveDay("2024-01-01")
	return []format.Record{
		{Seq: first, Op: format.Upsert, SeriesID: "A0", Period: day, Value: 999},
		{Seq: first + 1, Op: format.Upsert, SeriesID: "Z", Period: day, Value: 5},
	}
}

// `es cook` of a dataset with live updates (a snapshot of a new epoch
// published while the store is closed) must not get the old epoch's WAL
// replayed on top: stale values would come back and series absent from
// the new input would reappear. Seqs keep increasing (issue 10, item 3).
func TestTrustNewEpochRetiresOldWAL(t *testing.T) {
	home := liveTempDir(t)
	liveCook(t, home, "ds", trustTable("A", 3, 1), format.WriteOptions{Epoch: 1})
	s := liveOpen(t, home, &Options{ScrubBytesPerSec: -1})
	if _, err := s.Apply("ds", trustRecs(1)); err != nil {
		t.Fatal(err)
	}
	s.Close()
	// es cook: a new epoch, published beside the store (which is closed).
	liveCook(t, home, "ds", trustTable("A", 3, 50), format.WriteOptions{Epoch: 2})
	for reopen := range 2 {
		s = liveOpen(t, home, &Options{ScrubBytesPerSec: -1})
		trustWantServes(t, s, "A0", 50)
		if _, err := s.Info("Z"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("reopen %d: series Z of the old epoch's log is served: %v", reopen, err)
		}
		if seq, err := s.LastSeq("ds"); err != nil || seq < 2 {
			t.Fatalf("reopen %d: last seq %d, %v; seqs must not go back below 2", reopen, seq, err)
		}
		s.Close()
	}
	// New records of the new epoch are replayed as usual.
	s = liveOpen(t, home, &Options{ScrubBytesPerSec: -1})
	if n, err := s.Apply("ds", trustRecs(3)[1:]); err != nil || n != 1 {
		t.Fatalf("apply at seq 4: %d, %v", n, err)
	}
	s.Close()
	s = liveOpen(t, home, &Options{ScrubBytesPerSec: -1})
	defer s.Close()
	trustWantServes(t, s, "A0", 50)
	if _, err := s.Info("Z"); err != nil {
		t.Fatalf("the new epoch's record for Z: %v", err)
	}
}

// A dataset that lost CURRENT is damaged (reported), not absent; creating
// it again starts a clean epoch above every seq seen before, with nothing
// of the old WAL replayed (issue 10, item 11).
func TestTrustLostCurrentIsDamagedAndRecreatedClean(t *testing.T) {
	home := liveTempDir(t)
	liveCook(t, home, "ds", trustTable("A", 3, 1), format.WriteOptions{Epoch: 1})
	liveCook(t, home, "other", trustTable("O", 2, 1), format.WriteOptions{Epoch: 1})
	s := liveOpen(t, home, &Options{ScrubBytesPerSec: -1})
	if _, err := s.Apply("ds", trustRecs(1)); err != nil {
		t.Fatal(err)
	}
	s.Close()
	dsDir := filepath.Join(home, DatasetsDir, "ds")
	if err := os.Remove(filepath.Join(dsDir, format.CurrentFile)); err != nil {
		t.Fatal(err)
	}
	s = liveOpen(t, home, &Options{ScrubBytesPerSec: -1})
	defer s.Close()
	var ce *format.CorruptionError
	if err := s.Damaged("ds"); !errors.As(err, &ce) || ce.File != format.CurrentFile {
		t.Fatalf("Damaged(ds) = %v, want a CorruptionError naming CURRENT", err)
	}
	if st, _ := s.Status(); len(st) != 2 || st[0].Health != Damaged {
		t.Fatalf("status %+v: want ds listed as damaged", st)
	}
	trustWantServes(t, s, "O1", 2)
	// Re-create it, as the server does when a dataset is put again.
	if e := NextEpoch(dsDir); e != 2 {
		t.Fatalf("NextEpoch = %d, want 2 (above the log's epoch 1)", e)
	}
	// The worst case: the same epoch number as the lost one (a server that
	// did not ask NextEpoch).
	src := liveTempDir(t)
	m := liveCook(t, src, "ds", trustTable("A", 3, 10), format.WriteOptions{Epoch: 1})
	if _, err := s.Install("ds", trustSnapDir(src, "ds", m)); err != nil {
		t.Fatalf("re-create: %v", err)
	}
	if err := s.Damaged("ds"); err != nil {
		t.Fatalf("still damaged: %v", err)
	}
	trustWantServes(t, s, "A0", 10)
	if _, err := s.Info("Z"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the old log's series Z came back: %v", err)
	}
	seq, err := s.LastSeq("ds")
	if err != nil || seq < 2 {
		t.Fatalf("last seq %d, %v: the re-created dataset must start above seq 2", seq, err)
	}
	if n, err := s.Apply("ds", trustRecs(seq + 1)[:1]); err != nil || n != 1 {
		t.Fatalf("apply above the floor: %d %v", n, err)
	}
	s.Close()
	s = liveOpen(t, home, &Options{ScrubBytesPerSec: -1})
	if _, err := s.Info("Z"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("after reopen the old log's series Z came back: %v", err)
	}
	per, vals, err := s.Copy("A0", snapshot.MinTime, snapshot.MaxTime)
	if err != nil || len(per) != 400 || vals[0] != 999 {
		t.Fatalf("the re-created epoch's own record is lost: %v %v", vals[:1], err)
	}
	// A later replacement (epoch 2) drops the re-created epoch's record.
	src = liveTempDir(t)
	m = liveCook(t, src, "ds", trustTable("A", 3, 20), format.WriteOptions{Epoch: NextEpoch(dsDir)})
	if m.Epoch != 2 {
		t.Fatalf("NextEpoch gave %d, want 2", m.Epoch)
	}
	if _, err := s.Install("ds", trustSnapDir(src, "ds", m)); err != nil {
		t.Fatal(err)
	}
	trustWantServes(t, s, "A0", 20)
	if seq2, _ := s.LastSeq("ds"); seq2 < seq+1 {
		t.Fatalf("seq went back from %d to %d", seq+1, seq2)
	}
}

// A damaged dataset of a companion (its snapshot, not CURRENT, damaged)
// healed by a re-download of the same epoch keeps the log's records above
// the downloaded snapshot: they are the server's records of that epoch.
func TestTrustHealSameEpochKeepsLog(t *testing.T) {
	home := liveTempDir(t)
	m := liveCook(t, home, "ds", trustTable("A", 3, 1), format.WriteOptions{Epoch: 1})
	spare := liveCopyDir(t, trustSnapDir(home, "ds", m))
	s := liveOpen(t, home, &Options{ScrubBytesPerSec: -1})
	if _, err := s.Apply("ds", trustRecs(1)); err != nil {
		t.Fatal(err)
	}
	s.Close()
	liveTruncate(t, filepath.Join(trustSnapDir(home, "ds", m), format.DataFile), -8)
	s = liveOpen(t, home, &Options{ScrubBytesPerSec: -1})
	defer s.Close()
	if err := s.Damaged("ds"); !errors.Is(err, ErrDamaged) {
		t.Fatalf("Damaged = %v", err)
	}
	if _, err := s.Install("ds", spare); err != nil {
		t.Fatal(err)
	}
	per, vals, err := s.Copy("A0", snapshot.MinTime, snapshot.MaxTime)
	if err != nil || len(per) != 400 || vals[0] != 999 {
		t.Fatalf("A0 after healing: %v, %v; want the log's 999 kept", vals[:1], err)
	}
	if _, err := s.Info("Z"); err != nil {
		t.Fatalf("Z after healing: %v", err)
	}
	if seq, _ := s.LastSeq("ds"); seq != 2 {
		t.Fatalf("last seq %d, want 2", seq)
	}
}

// A write-ahead log corrupt before its end makes its dataset damaged (the
// log refuses to open), not the home; installing a snapshot over it sets
// the log aside and starts above every seq it may have handed out.
func TestTrustCorruptWALIsContainedAndHealed(t *testing.T) {
	home := liveTempDir(t)
	m := liveCook(t, home, "ds", trustTable("A", 3, 1), format.WriteOptions{Epoch: 1})
	liveCook(t, home, "other", trustTable("O", 2, 1), format.WriteOptions{Epoch: 1})
	spare := liveCopyDir(t, trustSnapDir(home, "ds", m))
	s := liveOpen(t, home, &Options{ScrubBytesPerSec: -1})
	for seq := uint64(1); seq <= 9; seq += 2 {
		if _, err := s.Apply("ds", trustRecs(seq)); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	segs, _ := filepath.Glob(filepath.Join(home, DatasetsDir, "ds", WALDir, "*.wal"))
	if len(segs) != 1 {
		t.Fatalf("segments %v", segs)
	}
	flipByte(t, segs[0], 8+8+3) // inside the first frame's payload; four intact frames follow
	s = liveOpen(t, home, &Options{ScrubBytesPerSec: -1})
	defer s.Close()
	var ce *delta.CorruptionError
	if err := s.Damaged("ds"); !errors.Is(err, ErrDamaged) || !errors.As(err, &ce) {
		t.Fatalf("Damaged(ds) = %v, want the log's CorruptionError", err)
	}
	trustWantServes(t, s, "O1", 2)
	if _, err := s.Install("ds", spare); err != nil {
		t.Fatalf("install over the damaged log: %v", err)
	}
	trustWantServes(t, s, "A0", 1)
	if seq, err := s.LastSeq("ds"); err != nil || seq < 10 {
		t.Fatalf("last seq %d, %v: must start above the damaged log's 10", seq, err)
	}
	// The damaged log is kept, aside, for inspection.
	if aside, _ := filepath.Glob(filepath.Join(home, DatasetsDir, "ds", DamagedPrefix+WALDir+"-*")); len(aside) != 1 {
		t.Fatalf("set aside: %v, want the damaged log", aside)
	}
	s.Close()
	s = liveOpen(t, home, &Options{ScrubBytesPerSec: -1})
	if err := s.Damaged("ds"); err != nil {
		t.Fatalf("after reopen: %v", err)
	}
	if seq, err := s.LastSeq("ds"); err != nil || seq < 10 {
		t.Fatalf("after reopen last seq %d, %v", seq, err)
	}
}

// Writes read the mappings too (Apply looks series up in index.hash,
// compaction reads every point): a truncated file fails them and marks
// the dataset damaged, it does not kill the process.
func TestTrustTruncatedMappingUnderWrites(t *testing.T) {
	for _, c := range []struct {
		file  string
		write func(s *Store) error
	}{
		{format.HashFile, func(s *Store) error {
			_, err := s.Apply("bad", []format.Record{{Seq: 1, Op: format.Upsert, SeriesID: "B1", Period: liveDay("2024-01-01"), Value: 1}})
			return err
		}},
		{format.DataFile, func(s *Store) error {
			_, err := s.Compact("bad")
			return err
		}},
	} {
		t.Run(c.file, func(t *testing.T) {
			home := liveTempDir(t)
			liveCook(t, home, "good", trustTable("G", 3, 10), format.WriteOptions{Epoch: 1})
			mb := liveCook(t, home, "bad", trustTable("B", 50, 20), format.WriteOptions{Epoch: 1})
			s := liveOpen(t, home, &Options{ScrubBytesPerSec: -1, CompactRows: -1, CompactBytes: -1})
			defer s.Close()
			if c.file == format.DataFile { // something to fold
				if _, err := s.Apply("bad", []format.Record{{Seq: 1, Op: format.Upsert, SeriesID: "B1", Period: liveDay("2024-01-01"), Value: 1}}); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.Truncate(filepath.Join(trustSnapDir(home, "bad", mb), c.file), 0); err != nil {
				t.Fatal(err)
			}
			if err := c.write(s); !errors.Is(err, ErrDamaged) {
				t.Fatalf("write over a truncated %s: %v, want ErrDamaged", c.file, err)
			}
			if err := s.Damaged("bad"); err == nil {
				t.Fatal("not marked damaged")
			}
			trustWantServes(t, s, "G1", 11)
		})
	}
}

// GetInto over a mapping that shrank underneath: the fault is an
// ErrDamaged error, the caller's Result is left empty (it held the good
// dataset's snapshot before: released, not leaked), and the damaged
// snapshot's reference is released, so that an install over it unmaps it.
func TestTrustGetIntoFaultEmptiesResult(t *testing.T) {
	home := liveTempDir(t)
	liveCook(t, home, "good", trustTable("G", 3, 10), format.WriteOptions{Epoch: 1})
	mb := liveCook(t, home, "bad", trustTable("B", 50, 20), format.WriteOptions{Epoch: 1})
	spare := liveCopyDir(t, trustSnapDir(home, "bad", mb))
	s := liveOpen(t, home, &Options{ScrubBytesPerSec: -1})
	defer s.Close()
	refs := func(ds string) int64 {
		t.Helper()
		for _, d := range s.list.Load().ds {
			if d.name == ds {
				return d.cur.Load().snap.Refs()
			}
		}
		t.Fatalf("no dataset %s", ds)
		return 0
	}
	good0, bad := refs("good"), s.list.Load().ds[0].cur.Load().snap
	if s.list.Load().ds[0].name != "bad" {
		t.Fatal("datasets out of name order")
	}
	bad0 := bad.Refs()
	var r Result
	if err := s.GetInto("good:G1", snapshot.MinTime, snapshot.MaxTime, &r); err != nil || r.Points.Len() != 400 {
		t.Fatalf("GetInto(good:G1): %d points, %v", r.Points.Len(), err)
	}
	if refs("good") != good0+1 {
		t.Fatalf("good refs %d with a Result held, want %d", refs("good"), good0+1)
	}
	if err := os.Truncate(filepath.Join(trustSnapDir(home, "bad", mb), format.DataFile), 0); err != nil {
		t.Fatal(err)
	}
	err := s.GetInto("bad:B7", snapshot.MinTime, snapshot.MaxTime, &r)
	if !errors.Is(err, ErrDamaged) {
		t.Fatalf("GetInto from a truncated data.arrow: %v, want ErrDamaged", err)
	}
	if r.Points.Len() != 0 || r.Dataset != "" || r.snap != nil {
		t.Fatalf("the Result after a fault: %+v", r)
	}
	if m := s.Metrics(); m.Faults != 1 {
		t.Fatalf("%d faults, want 1", m.Faults)
	}
	if refs("good") != good0 {
		t.Fatalf("good refs %d after GetInto moved on, want %d", refs("good"), good0)
	}
	if bad.Refs() != bad0 {
		t.Fatalf("damaged snapshot refs %d after the fault, want %d (a reference leaked)", bad.Refs(), bad0)
	}
	r.Release()
	if _, err := s.Install("bad", spare); err != nil {
		t.Fatalf("install over the damaged dataset: %v", err)
	}
	if bad.Refs() != 0 {
		t.Fatalf("damaged snapshot refs %d after the install, want 0 (unmapped)", bad.Refs())
	}
	trustWantServes(t, s, "bad:B7", 27)
}
