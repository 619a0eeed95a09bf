//go:build unix

package localcache

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/energyscope/energyscope/localcache/format"
)

// The crash test re-executes the test binary as the child; these
// variables tell it that it is the child and where to work.
const (
	liveCrashHome  = "ES_LIVE_CRASH_HOME"
	liveCrashOther = "ES_LIVE_CRASH_OTHER"
	liveCrashSeed  = "ES_LIVE_CRASH_SEED"
	liveCrashRun   = "ES_LIVE_CRASH_RUN"
)

// liveCrashBase is the snapshot both homes of the crash test start from.
func liveCrashBase() *format.Table {
	tb := &format.Table{Series: []format.SeriesMeta{
		{ID: "A", Name: "a", Frequency: format.Daily},
		{ID: "M", Name: "m", Frequency: format.Monthly},
	}}
	for i := range 30 {
		tb.Append(0, liveDay("2026-01-01")+int64(i)*86400, float64(i))
	}
	for i := range 6 {
		tb.Append(1, time.Date(2025, time.Month(7+i), 1, 0, 0, 0, 0, time.UTC).Unix(), float64(i))
	}
	return tb
}

// liveCrashBatch is the batch that starts at seq first: a pure function of
// (seed, first), so that parent and child agree on every batch without
// talking. Its values are first + k/100: unique to the batch, so a half
// batch could not pass for a whole one.
func liveCrashBatch(seed, first uint64) []format.Record {
	rng := rand.New(rand.NewPCG(seed, first))
	n := 1 + rng.IntN(12)
	type series struct {
		id   string
		freq format.Frequency
	}
	all := []series{{"A", ""}, {"M", ""}, {"N1", format.Daily}, {"W1", format.Weekly}, {"H1", format.Hourly}, {"Q1", "quarterly"}}
	out := make([]format.Record, n)
	for k := range out {
		s := all[rng.IntN(len(all))]
		r := format.Record{Seq: first + uint64(k), Op: format.Upsert, SeriesID: s.id, Value: float64(first) + float64(k)/100,
			Period: liveDay("2026-01-01") + rng.Int64N(120*86400)}
		if s.freq == format.Hourly {
			r.Period = liveDay("2026-01-01") + rng.Int64N(10*86400)
		}
		if s.freq != "" {
			// New series carry their metadata on every record, so their
			// frequency does not depend on which record came first.
			r.Meta = &format.RecordMeta{Name: fmt.Sprint(s.id, "@", first), Frequency: s.freq}
		} else if rng.IntN(8) == 0 {
			r.Meta = &format.RecordMeta{Name: fmt.Sprint("renamed@", first), Unit: "u"}
		}
		if rng.IntN(5) == 0 {
			r.Op = format.Delete
		}
		out[k] = r
	}
	return out
}

// liveCrashNext returns the first seq of the batch after the one that ends
// at last, walking the chain of batches from seq 1; ok is false if last is
// not the end of a batch.
func liveCrashNext(seed, last uint64) (uint64, bool) {
	first := uint64(1)
	for first <= last {
		first += uint64(len(liveCrashBatch(seed, first)))
	}
	return first, first == last+1
}

// liveCrashChild is the process the crash test kills: it applies batches
// to home, printing "ack <first> <last>" only after Apply returned,
// compacts now and then (and in the background, by policy), and installs
// snapshots that a second home fed the same batches compacted. It runs
// until it is killed.
func liveCrashChild() {
	fail := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "crash child: "+format+"\n", args...)
		os.Exit(3)
	}
	seed, err := strconv.ParseUint(os.Getenv(liveCrashSeed), 10, 64)
	if err != nil {
		fail("seed: %v", err)
	}
	run, _ := strconv.ParseUint(os.Getenv(liveCrashRun), 10, 64)
	rng := rand.New(rand.NewPCG(seed, run))
	s, err := Open(os.Getenv(liveCrashHome), &Options{CompactRows: 30 + rng.IntN(100), CompactBytes: -1, Keep: 1 + rng.IntN(3)})
	if err != nil {
		fail("open: %v", err)
	}
	s2, err := Open(os.Getenv(liveCrashOther), &Options{CompactRows: -1, CompactBytes: -1})
	if err != nil {
		fail("open other: %v", err)
	}
	last, _ := s.LastSeq("d")
	next, ok := liveCrashNext(seed, last)
	if !ok {
		fail("last seq %d is not the end of a batch", last)
	}
	// The second home lags by at most the batches this one got before a
	// kill; catch it up so that it never covers what home lacks.
	last2, _ := s2.LastSeq("d")
	n2, ok := liveCrashNext(seed, last2)
	if !ok || last2 > last {
		fail("other home at seq %d, home at %d", last2, last)
	}
	for ; n2 < next; n2 += uint64(len(liveCrashBatch(seed, n2))) {
		if _, err := s2.Apply("d", liveCrashBatch(seed, n2)); err != nil {
			fail("catch up: %v", err)
		}
	}
	fmt.Fprintln(os.Stdout, "ready")
	for {
		switch x := rng.IntN(100); {
		case x < 85:
			b := liveCrashBatch(seed, next)
			if n, err := s.Apply("d", b); err != nil || n != len(b) {
				fail("apply %d: %d %v", next, n, err)
			}
			fmt.Fprintf(os.Stdout, "ack %d %d\n", next, b[len(b)-1].Seq)
			if _, err := s2.Apply("d", b); err != nil {
				fail("apply to other: %v", err)
			}
			next += uint64(len(b))
		case x < 93:
			if _, err := s.Compact("d"); err != nil {
				fail("compact: %v", err)
			}
		default:
			if _, err := s2.Compact("d"); err != nil {
				fail("compact other: %v", err)
			}
			st, err := s2.Status()
			if err != nil {
				fail("status: %v", err)
			}
			if _, err := s.Install("d", st[0].Dir); err != nil && !strings.Contains(err.Error(), "older") {
				fail("install: %v", err)
			}
		}
	}
}

// TestCrashApplyCompactInstall kills a child process that applies,
// compacts and installs at random moments with SIGKILL, then checks that
// the home opens, serves every acknowledged batch and at most one more
// (whole), and that its snapshot verifies.
func TestCrashApplyCompactInstall(t *testing.T) {
	if os.Getenv(liveCrashHome) != "" {
		liveCrashChild()
		return
	}
	trials := 20
	if liveRace() {
		// The race build starts slowly; the plain run does the 20.
		trials = 10
	}
	if liveLong() {
		trials = 200
	}
	seed := liveSeed(t)
	rng := rand.New(rand.NewPCG(seed, 1))
	home, other := liveTempDir(t), liveTempDir(t)
	liveCook(t, home, "d", liveCrashBase(), format.WriteOptions{Epoch: 1})
	liveCook(t, other, "d", liveCrashBase(), format.WriteOptions{Epoch: 1})
	model := liveModelOf(liveCrashBase())
	var totalAcks, inDoubtPresent, tornWarnings, midWrite int
	for trial := range trials {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashApplyCompactInstall$", "-test.count=1")
		cmd.Env = append(os.Environ(), liveCrashHome+"="+home, liveCrashOther+"="+other,
			liveCrashSeed+"="+strconv.FormatUint(seed, 10), liveCrashRun+"="+strconv.Itoa(trial))
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		acks := make(chan [2]uint64, 1<<16)
		ready := make(chan struct{})
		go func() {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				var a [2]uint64
				if sc.Text() == "ready" {
					close(ready)
				} else if _, err := fmt.Sscanf(sc.Text(), "ack %d %d", &a[0], &a[1]); err == nil {
					acks <- a
				}
			}
			io.Copy(io.Discard, out)
			close(acks)
		}()
		if rng.IntN(5) > 0 {
			// Mostly kill it at work; else anywhere, recovery included.
			select {
			case <-ready:
			case <-time.After(time.Minute):
			}
		}
		time.Sleep(time.Duration(rng.IntN(300)) * time.Millisecond)
		cmd.Process.Kill()
		var got [][2]uint64
		for a := range acks {
			got = append(got, a)
		}
		cmd.Wait()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			t.Fatalf("trial %d: the child ended by itself (%v):\n%s", trial, cmd.ProcessState, stderr.String())
		}
		if strings.Contains(stderr.String(), "DATA RACE") {
			t.Fatalf("trial %d: the child found a data race:\n%s", trial, stderr.String())
		}
		// Every acknowledged batch goes into the model, in order.
		for _, a := range got {
			b := liveCrashBatch(seed, a[0])
			if a[0] != model.last+1 || a[1] != b[len(b)-1].Seq {
				t.Fatalf("trial %d: acknowledgment %v does not follow seq %d", trial, a, model.last)
			}
			model.apply(b)
		}
		totalAcks += len(got)

		for _, name := range liveSnapDirs(t, home) {
			if strings.HasPrefix(name, format.TempPrefix) {
				midWrite++ // killed while writing or copying a snapshot
				break
			}
		}
		log, buf := liveLogger()
		s, err := Open(home, &Options{Logger: log, CompactRows: -1, CompactBytes: -1})
		if err != nil {
			t.Fatalf("trial %d: open after the kill: %v\nchild stderr:\n%s", trial, err, stderr.String())
		}
		if strings.Contains(buf.String(), "torn") {
			tornWarnings++
		}
		last, _ := s.LastSeq("d")
		switch {
		case last < model.last:
			s.Close()
			t.Fatalf("trial %d: last seq %d after the kill; seq %d was acknowledged", trial, last, model.last)
		case last > model.last:
			// The batch in flight at the kill made it to the log whole: it
			// is durable now, and in the model from here on.
			b := liveCrashBatch(seed, model.last+1)
			if last != b[len(b)-1].Seq {
				s.Close()
				t.Fatalf("trial %d: last seq %d after the kill: acknowledged %d, the batch in flight ends at %d", trial, last, model.last, b[len(b)-1].Seq)
			}
			model.apply(b)
			inDoubtPresent++
		}
		if err := liveCheck(s, model, rng); err != nil {
			s.Close()
			t.Fatalf("trial %d: %v", trial, err)
		}
		st, _ := s.Status()
		if _, err := format.Verify(st[0].Dir); err != nil {
			t.Fatalf("trial %d: snapshot in service does not verify: %v", trial, err)
		}
		for _, name := range liveSnapDirs(t, home) {
			if strings.HasPrefix(name, format.TempPrefix) {
				t.Fatalf("trial %d: %s not swept at open", trial, name)
			}
		}
		s.Close()
	}
	if totalAcks == 0 {
		t.Fatal("the child never acknowledged a batch")
	}
	t.Logf("%d trials, %d acknowledged batches, %d in-flight batches found whole, %d torn tails cut, %d kills while a snapshot was written; last seq %d, %d series",
		trials, totalAcks, inDoubtPresent, tornWarnings, midWrite, model.last, len(model.series))
}

// TestLiveTornWALTail cuts the log of a store at every byte of its last
// batch, and flips every byte of it: Open succeeds with a warning, keeps
// every earlier batch, takes new batches, and a second open sees them.
func TestLiveTornWALTail(t *testing.T) {
	home := liveTempDir(t)
	liveCook(t, home, "d", liveGenBase(), format.WriteOptions{Epoch: 1})
	s := liveOpen(t, home, &Options{CompactRows: -1, CompactBytes: -1})
	for g := uint64(1); g <= 2; g++ {
		if _, err := s.Apply("d", liveGenBatch(g)); err != nil {
			t.Fatal(err)
		}
	}
	walDir := filepath.Join(home, DatasetsDir, "d", WALDir)
	segs, _ := os.ReadDir(walDir)
	if len(segs) != 1 {
		t.Fatalf("%d segments", len(segs))
	}
	seg := filepath.Join(walDir, segs[0].Name())
	st, _ := os.Stat(seg)
	start := st.Size()
	last := []format.Record{
		{Seq: 2*liveGenRecords + 1, Op: format.Upsert, SeriesID: "Z", Period: liveDay("2026-03-03"), Value: 1, Meta: &format.RecordMeta{Name: "z", Frequency: "M"}},
		{Seq: 2*liveGenRecords + 2, Op: format.Delete, SeriesID: "S1", Period: liveGenPeriod(3)},
		{Seq: 2*liveGenRecords + 3, Op: format.Upsert, SeriesID: "Z", Period: liveDay("2026-04-03"), Value: 2},
	}
	if _, err := s.Apply("d", last); err != nil {
		t.Fatal(err)
	}
	s.Close()
	full, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	before := liveModelOf(liveGenBase())
	before.apply(liveGenBatch(1))
	before.apply(liveGenBatch(2))
	after := before.clone()
	after.apply(last)
	check := func(name string, b []byte, torn bool) {
		if err := os.WriteFile(seg, b, 0o644); err != nil {
			t.Fatal(err)
		}
		log, buf := liveLogger()
		s, err := Open(home, &Options{Logger: log, CompactRows: -1, CompactBytes: -1})
		if err != nil {
			t.Fatalf("%s: open: %v", name, err)
		}
		if warned := strings.Contains(buf.String(), "level=WARN"); warned != torn {
			t.Fatalf("%s: warning %v, want %v: %s", name, warned, torn, buf.String())
		}
		if err := liveCheck(s, before, nil); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if n, err := s.Apply("d", last); err != nil || n != len(last) {
			t.Fatalf("%s: apply after the cut: %d %v", name, n, err)
		}
		s.Close()
		log, buf = liveLogger()
		s, err = Open(home, &Options{Logger: log, CompactRows: -1, CompactBytes: -1})
		if err != nil {
			t.Fatalf("%s: second open: %v", name, err)
		}
		if strings.Contains(buf.String(), "level=WARN") {
			t.Fatalf("%s: second open warned: %s", name, buf.String())
		}
		if err := liveCheck(s, after, nil); err != nil {
			t.Fatalf("%s: second open: %v", name, err)
		}
		s.Close()
	}
	check("clean end", full[:start], false)
	for off := start + 1; off < int64(len(full)); off++ {
		check(fmt.Sprint("cut at ", off), full[:off], true)
	}
	for off := start; off < int64(len(full)); off++ {
		b := slices.Clone(full)
		b[off] ^= 0x04
		check(fmt.Sprint("flip at ", off), b, true)
	}
}

// liveFileLimit runs f with the process unable to grow any file past
// limit bytes (RLIMIT_FSIZE: writes fail with EFBIG, as on a full disk).
// It affects the whole test process, so it must not run in parallel.
func liveFileLimit(t *testing.T, limit uint64, f func()) {
	t.Helper()
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
		t.Skipf("getrlimit: %v", err)
	}
	lim := old
	lim.Cur = limit
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
		t.Skipf("setrlimit: %v", err)
	}
	defer func() {
		if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
			panic(err) // the rest of the run would fail strangely
		}
	}()
	f()
}

func liveSegSize(t *testing.T, home string) (size int64, segs int) {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(home, DatasetsDir, "d", WALDir))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		fi, _ := e.Info()
		size += fi.Size()
	}
	return size, len(ents)
}

// TestLiveFailedWrites: a write that fails during Apply, Compact or
// Install (a full disk, an unwritable directory) fails the call, and the
// store keeps serving the old state, and takes the same call once the
// disk is back; a reopen sees exactly the acknowledged state.
func TestLiveFailedWrites(t *testing.T) {
	home, other := liveTempDir(t), liveTempDir(t)
	liveCook(t, home, "d", liveGenBase(), format.WriteOptions{Epoch: 1})
	liveCook(t, other, "d", liveGenBase(), format.WriteOptions{Epoch: 1})
	log, buf := liveLogger()
	opts := &Options{Logger: log, CompactRows: -1, CompactBytes: -1}
	s := liveOpen(t, home, opts)
	defer func() { s.Close() }()
	s2 := liveOpen(t, other, nil)
	defer s2.Close()
	model := liveModelOf(liveGenBase())
	apply := func(g uint64) {
		t.Helper()
		b := liveGenBatch(g)
		if _, err := s.Apply("d", b); err != nil {
			t.Fatalf("apply %d: %v", g, err)
		}
		s2.Apply("d", b)
		model.apply(b)
	}
	same := func(what string) {
		t.Helper()
		if err := liveCheck(s, model, nil); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	apply(1)

	t.Run("apply on a full disk", func(t *testing.T) {
		size, _ := liveSegSize(t, home)
		liveFileLimit(t, uint64(size)+10, func() {
			if n, err := s.Apply("d", liveGenBatch(2)); err == nil || n != 0 {
				t.Fatalf("apply on a full disk: %d %v", n, err)
			}
		})
		same("after a failed apply")
		if now, _ := liveSegSize(t, home); now != size {
			t.Fatalf("the partial frame was not cut off: log %d bytes, was %d", now, size)
		}
		apply(2)
		same("after the retry")
	})

	t.Run("compact on a full disk", func(t *testing.T) {
		dirs := liveSnapDirs(t, home)
		liveFileLimit(t, 512, func() {
			if _, err := s.Compact("d"); err == nil {
				t.Fatal("compaction on a full disk succeeded")
			}
		})
		same("after a failed compaction")
		if got := liveSnapDirs(t, home); !slices.Equal(got, dirs) {
			t.Fatalf("a failed compaction left %v (had %v)", got, dirs)
		}
		apply(3)
	})

	t.Run("compact with the snapshots directory gone", func(t *testing.T) {
		root := filepath.Join(home, DatasetsDir, "d", format.SnapshotsDir)
		if err := os.Rename(root, root+".away"); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(root, []byte("not a directory"), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := s.Compact("d")
		same("compaction without a snapshots directory")
		os.Remove(root)
		if err := os.Rename(root+".away", root); err != nil {
			t.Fatal(err)
		}
		if err == nil {
			t.Fatal("compaction without a snapshots directory succeeded")
		}
	})

	t.Run("compact with a read-only snapshots directory", func(t *testing.T) {
		if os.Geteuid() == 0 {
			t.Skip("running as root: permissions do not stop writes (the cases above cover the failure)")
		}
		root := filepath.Join(home, DatasetsDir, "d", format.SnapshotsDir)
		os.Chmod(root, 0o555)
		_, err := s.Compact("d")
		os.Chmod(root, 0o755)
		if err == nil {
			t.Fatal("compaction into a read-only directory succeeded")
		}
		same("after a failed compaction")
	})

	t.Run("install on a full disk", func(t *testing.T) {
		s2.Compact("d")
		st2, _ := s2.Status()
		dirs := liveSnapDirs(t, home)
		liveFileLimit(t, 512, func() {
			if _, err := s.Install("d", st2[0].Dir); err == nil {
				t.Fatal("install on a full disk succeeded")
			}
		})
		same("after a failed install")
		if got := liveSnapDirs(t, home); !slices.Equal(got, dirs) {
			t.Fatalf("a failed install left %v (had %v)", got, dirs)
		}
		if _, err := s.Install("d", st2[0].Dir); err != nil {
			t.Fatal(err)
		}
		same("after the install")
	})

	t.Run("CURRENT cannot move", func(t *testing.T) {
		apply(4)
		// CURRENT is replaced by renaming a temporary file over it; a
		// non-empty directory in its place makes that fail after the new
		// snapshot is in place.
		cur := filepath.Join(home, DatasetsDir, "d", format.CurrentFile)
		if err := os.Rename(cur, cur+".saved"); err != nil {
			t.Fatal(err)
		}
		os.MkdirAll(filepath.Join(cur, "x"), 0o755)
		_, before, _, _ := s.State("d")
		_, err := s.Compact("d")
		os.RemoveAll(cur)
		if err := os.Rename(cur+".saved", cur); err != nil {
			t.Fatal(err)
		}
		if err == nil {
			t.Fatal("compaction that could not move CURRENT succeeded")
		}
		// The failed call changed nothing: the old snapshot keeps serving,
		// as CURRENT names it, with the same data, and a restart (old
		// CURRENT, whole log) agrees.
		if _, now, _, _ := s.State("d"); now != before || liveCurrent(t, home, "d") != before {
			t.Fatalf("after a failed compaction the store serves %s and CURRENT names %s; both should still be %s", now, liveCurrent(t, home, "d"), before)
		}
		same("after CURRENT failed to move")
		if m, err := s.Compact("d"); err != nil {
			t.Fatalf("compaction once CURRENT can move: %v", err)
		} else if _, now, _, _ := s.State("d"); now != m.SnapshotID || liveCurrent(t, home, "d") != m.SnapshotID {
			t.Fatalf("after the retry the store serves %s, CURRENT names %s, the compaction made %s", now, liveCurrent(t, home, "d"), m.SnapshotID)
		}
		same("after the retry")
		s.Close()
		s = liveOpen(t, home, opts)
		same("reopened after CURRENT failed to move")
		apply(5)
		if _, err := s.Compact("d"); err != nil {
			t.Fatal(err)
		}
	})

	s.Close()
	s = liveOpen(t, home, opts)
	same("reopened")
	if strings.Contains(buf.String(), "torn") {
		t.Fatalf("the log needed cutting after the failures were cleaned up: %s", buf.String())
	}
}
