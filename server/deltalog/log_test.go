package deltalog

import (
	"context"
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/energyscope/energyscope/localcache/format"
)

func TestAppendReadEmbedded(t *testing.T) {
	n := startEmbedded(t, NodeOptions{})
	l := connectNode(t, n, Options{})
	ctx := testCtx(t, 20*time.Second)
	if l.Replicas() != 1 {
		t.Fatalf("replicas on a single node: %d", l.Replicas())
	}
	// An acknowledgement means fsynced: the file store syncs each write
	// (kill -9 cannot tell a sync from a write, the page cache survives
	// the process; TestEmbeddedKill9 proves the ack follows the write).
	if c := n.srv.JetStreamConfig(); c == nil || !c.SyncAlways {
		t.Fatalf("embedded node's JetStream config %+v: want SyncAlways", c)
	}
	if err := l.Create(ctx, "pet", CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	acked := map[int][2]uint64{}
	for i := range 5 {
		f, la, err := l.Append(ctx, "pet", batchOf(i, 10), keyOf(i))
		if err != nil {
			t.Fatal(err)
		}
		if want := uint64(i*10 + 1); f != want || la != want+9 {
			t.Fatalf("batch %d got seqs %d..%d, want %d..%d", i, f, la, want, want+9)
		}
		acked[i] = [2]uint64{f, la}
	}
	if got := checkLog(t, l, "pet", 10, acked); got != 50 {
		t.Fatalf("%d records", got)
	}
	if h, err := l.Head(ctx, "pet"); err != nil || h != 50 {
		t.Fatalf("head %d, %v", h, err)
	}
	// From the middle of a message: the records from there on.
	recs, err := l.Read(ctx, "pet", 23)
	if err != nil || len(recs) != 28 || recs[0].Seq != 23 || recs[27].Seq != 50 {
		t.Fatalf("read from 23: %d records, %v", len(recs), err)
	}
	if recs, err := l.Read(ctx, "pet", 51); err != nil || len(recs) != 0 {
		t.Fatalf("read from head+1: %d records, %v", len(recs), err)
	}
	if _, err := l.Read(ctx, "pet", 52); !errors.Is(err, ErrAhead) {
		t.Fatalf("read from head+2: %v, want ErrAhead", err)
	}
}

func keyOf(i int) string { return "batch-" + strconv.Itoa(i) }

// A dataset that moves to the log keeps its numbering: the first record
// follows Create's After, and creating again changes nothing.
func TestCreateAfter(t *testing.T) {
	n := startEmbedded(t, NodeOptions{})
	l := connectNode(t, n, Options{})
	ctx := testCtx(t, 20*time.Second)
	if err := l.Create(ctx, "eia.daily", CreateOptions{After: 1000}); err != nil {
		t.Fatal(err)
	}
	if h, err := l.Head(ctx, "eia.daily"); err != nil || h != 1000 {
		t.Fatalf("head of an empty log: %d, %v", h, err)
	}
	if _, err := l.Read(ctx, "eia.daily", 1000); !errors.Is(err, ErrTrimmed) {
		t.Fatalf("read below After: %v, want ErrTrimmed", err)
	}
	if err := l.Create(ctx, "eia.daily", CreateOptions{After: 5}); err != nil {
		t.Fatal(err)
	}
	f, la, err := l.Append(ctx, "eia.daily", batchOf(0, 3), "k")
	if err != nil || f != 1001 || la != 1003 {
		t.Fatalf("first append: %d..%d, %v", f, la, err)
	}
}

// A retry with the same key stores nothing and returns the first seqs,
// from the same Log, a new connection in-process, and a new connection
// over TCP; a new key appends after it.
func TestIdempotentAcrossReconnects(t *testing.T) {
	n := startEmbedded(t, NodeOptions{})
	ctx := testCtx(t, 20*time.Second)
	l := connectNode(t, n, Options{})
	if err := l.Create(ctx, "pet", CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	f, la, err := l.Append(ctx, "pet", batchOf(1, 4), "ingest-1")
	if err != nil || f != 1 || la != 4 {
		t.Fatalf("append: %d..%d, %v", f, la, err)
	}
	if _, _, err := l.Append(ctx, "pet", batchOf(2, 4), "ingest-2"); err != nil {
		t.Fatal(err)
	}
	retry := func(l *Log, what string) {
		t.Helper()
		f, la, err := l.Append(ctx, "pet", batchOf(1, 4), "ingest-1")
		if err != nil || f != 1 || la != 4 {
			t.Fatalf("%s: retry got %d..%d, %v; want 1..4", what, f, la, err)
		}
	}
	retry(l, "same connection")
	l.Close()
	l2 := connectNode(t, n, Options{})
	retry(l2, "new in-process connection")
	l3, err := Connect(n.ClientURL(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l3.Close()
	retry(l3, "new TCP connection")
	f, la, err = l3.Append(ctx, "pet", batchOf(3, 4), "ingest-3")
	if err != nil || f != 9 || la != 12 {
		t.Fatalf("a new key after retries: %d..%d, %v; want 9..12", f, la, err)
	}
	checkLog(t, l3, "pet", 4, map[int][2]uint64{1: {1, 4}, 2: {5, 8}, 3: {9, 12}})
	if m := l3.Metrics(); m.Duplicates != 1 || m.Appends != 2 || m.Records != 8 {
		t.Fatalf("metrics of the TCP Log: %+v", m)
	}
	if _, _, err := l.Append(ctx, "pet", batchOf(4, 4), "k"); err == nil {
		t.Fatal("append on a closed Log succeeded")
	}
}

func TestTrim(t *testing.T) {
	n := startEmbedded(t, NodeOptions{})
	l := connectNode(t, n, Options{})
	ctx := testCtx(t, 20*time.Second)
	if err := l.Create(ctx, "pet", CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := range 5 { // seqs 1..50, ten per message
		if _, _, err := l.Append(ctx, "pet", batchOf(i, 10), keyOf(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Trim(ctx, "pet", 25); err != nil { // drops 1..10 and 11..20, keeps 21..30 (holds 25)
		t.Fatal(err)
	}
	if _, err := l.Read(ctx, "pet", 20); !errors.Is(err, ErrTrimmed) {
		t.Fatalf("read below the trim: %v, want ErrTrimmed", err)
	}
	recs, err := l.Read(ctx, "pet", 21)
	if err != nil || len(recs) != 30 || recs[0].Seq != 21 {
		t.Fatalf("read from 21 after trim: %d records, %v", len(recs), err)
	}
	if err := l.Trim(ctx, "pet", 10); err != nil { // below what is left: nothing
		t.Fatal(err)
	}
	if err := l.Trim(ctx, "pet", 1000); err != nil { // beyond the head: the last message stays
		t.Fatal(err)
	}
	if h, err := l.Head(ctx, "pet"); err != nil || h != 50 {
		t.Fatalf("head after trimming everything: %d, %v", h, err)
	}
	if _, err := l.Read(ctx, "pet", 40); !errors.Is(err, ErrTrimmed) {
		t.Fatalf("read from 40: %v, want ErrTrimmed", err)
	}
	// A new Log (fresh tail) numbers on from the kept head.
	l2 := connectNode(t, n, Options{})
	if f, la, err := l2.Append(ctx, "pet", batchOf(9, 10), "after-trim"); err != nil || f != 51 || la != 60 {
		t.Fatalf("append after trim: %d..%d, %v", f, la, err)
	}
	if recs, err := l2.Read(ctx, "pet", 41); err != nil || len(recs) != 20 || recs[0].Seq != 41 {
		t.Fatalf("read from 41: %d records, %v", len(recs), err)
	}
	// A retry of a key whose message was trimmed since cannot return its
	// seqs: ErrTrimmed, and nothing is stored again.
	if _, _, err := l2.Append(ctx, "pet", batchOf(0, 10), keyOf(0)); !errors.Is(err, ErrTrimmed) {
		t.Fatalf("retry of a trimmed key: %v, want ErrTrimmed", err)
	}
	if h, err := l2.Head(ctx, "pet"); err != nil || h != 60 {
		t.Fatalf("head after the retry of a trimmed key: %d, %v", h, err)
	}
}

// Bad input gets a typed error and writes nothing.
func TestBadInput(t *testing.T) {
	n := startEmbedded(t, NodeOptions{MaxPayload: 64 << 10})
	l := connectNode(t, n, Options{})
	ctx := testCtx(t, 20*time.Second)
	if err := l.Create(ctx, "Pet", CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := l.Append(ctx, "Pet", batchOf(0, 2), "first"); err != nil {
		t.Fatal(err)
	}
	nan := batchOf(1, 3)
	nan[1].Value = math.NaN()
	badSeries := batchOf(1, 3)
	badSeries[2].SeriesID = "a\x00b"
	big := batchOf(1, 5000) // ~125 KB encoded, over 64 KiB
	cases := []struct {
		name    string
		create  bool
		dataset string
		recs    []format.Record
		key     string
		want    error
	}{
		{"no records", false, "Pet", nil, "k1", ErrEmpty},
		{"empty key", false, "Pet", batchOf(1, 1), "", ErrBadKey},
		{"key with a space", false, "Pet", batchOf(1, 1), "a b", ErrBadKey},
		{"key with a newline", false, "Pet", batchOf(1, 1), "a\r\nNats-Msg-Id: x", ErrBadKey},
		{"long key", false, "Pet", batchOf(1, 1), strings.Repeat("k", MaxKeyLen+1), ErrBadKey},
		{"bad dataset name", false, "pet/../x", batchOf(1, 1), "k1", ErrBadName},
		{"device name", false, "con", batchOf(1, 1), "k1", ErrBadName},
		{"empty name", false, "", batchOf(1, 1), "k1", ErrBadName},
		{"wildcard", false, "pet>", batchOf(1, 1), "k1", ErrBadName},
		{"unknown dataset", false, "other", batchOf(1, 1), "k1", ErrUnknownDataset},
		{"case of another dataset", false, "pet", batchOf(1, 1), "k1", ErrNameConflict},
		{"create case of another dataset", true, "PET", nil, "", ErrNameConflict},
		{"NaN value", false, "Pet", nan, "k1", ErrBadRecord},
		{"NUL in a series id", false, "Pet", badSeries, "k1", ErrBadRecord},
		{"oversized batch", false, "Pet", big, "k1", ErrTooLarge},
	}
	for _, c := range cases {
		var err error
		if c.create {
			err = l.Create(ctx, c.dataset, CreateOptions{})
		} else {
			_, _, err = l.Append(ctx, c.dataset, c.recs, c.key)
		}
		if !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	var tl *TooLargeError
	if _, _, err := l.Append(ctx, "Pet", big, "k1"); !errors.As(err, &tl) || tl.Records != 5000 || tl.Bytes <= tl.Limit {
		t.Fatalf("oversized: %v (%+v)", err, tl)
	}
	if _, err := l.Read(ctx, "nope", 1); !errors.Is(err, ErrUnknownDataset) {
		t.Fatalf("read of an unknown dataset: %v", err)
	}
	if err := l.Trim(ctx, "pet", 1); !errors.Is(err, ErrNameConflict) {
		t.Fatalf("trim by another case: %v", err)
	}
	if h, err := l.Head(ctx, "Pet"); err != nil || h != 2 {
		t.Fatalf("head after bad input: %d, %v (bad input must write nothing)", h, err)
	}
	// A batch under the limit goes through.
	if _, _, err := l.Append(ctx, "Pet", batchOf(2, 1000), "fits"); err != nil {
		t.Fatal(err)
	}
	if h, _ := l.Head(ctx, "Pet"); h != 1002 {
		t.Fatalf("head %d after a batch under the limit, want 1002", h)
	}
}

// Two writers on two connections append to one dataset at once: the
// expected-last-sequence check keeps seqs contiguous, each writer's seqs
// are the ones logged.
func TestConcurrentWriters(t *testing.T) {
	n := startEmbedded(t, NodeOptions{})
	ctx := testCtx(t, 25*time.Second)
	a := connectNode(t, n, Options{})
	b, err := Connect(n.ClientURL(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := a.Create(ctx, "pet", CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	acked := map[int][2]uint64{}
	var wg sync.WaitGroup
	for w, l := range []*Log{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < 60; i += 2 {
				f, la, err := l.Append(ctx, "pet", batchOf(i, 7), keyOf(i))
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				acked[i] = [2]uint64{f, la}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if got := checkLog(t, a, "pet", 7, acked); got != 60*7 {
		t.Fatalf("%d records, want %d", got, 60*7)
	}
}

func TestFollow(t *testing.T) {
	n := startEmbedded(t, NodeOptions{})
	l := connectNode(t, n, Options{})
	ctx := testCtx(t, 20*time.Second)
	if err := l.Create(ctx, "pet", CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, _, err := l.Append(ctx, "pet", batchOf(i, 5), keyOf(i)); err != nil {
			t.Fatal(err)
		}
	}
	fctx, stop := context.WithCancel(ctx)
	got := make(chan []format.Record, 100)
	done := make(chan error, 1)
	go func() {
		done <- l.Follow(fctx, "pet", 8, func(recs []format.Record) error {
			got <- recs
			return nil
		})
	}()
	next := uint64(8)
	want := uint64(50) // 3 batches before, 7 while following
	for i := 3; i < 10; i++ {
		if _, _, err := l.Append(ctx, "pet", batchOf(i, 5), keyOf(i)); err != nil {
			t.Fatal(err)
		}
	}
	for next <= want {
		select {
		case recs := <-got:
			for _, r := range recs {
				if r.Seq != next {
					t.Fatalf("followed seq %d, want %d", r.Seq, next)
				}
				next++
			}
		case err := <-done:
			t.Fatalf("follow ended: %v", err)
		case <-ctx.Done():
			t.Fatalf("follow stalled at %d", next)
		}
	}
	stop()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("follow after cancel: %v", err)
	}
	// fn's error ends Follow with that error.
	errStop := errors.New("stop")
	if err := l.Follow(ctx, "pet", 1, func([]format.Record) error { return errStop }); err != errStop {
		t.Fatalf("follow with a failing fn: %v", err)
	}
}

// A message that is not ours on the subject, or whose checksum fails,
// is a *CorruptionError naming its stream seq, never a panic.
func TestCorruptMessage(t *testing.T) {
	n := startEmbedded(t, NodeOptions{})
	l := connectNode(t, n, Options{})
	ctx := testCtx(t, 20*time.Second)
	if err := l.Create(ctx, "pet", CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := l.Append(ctx, "pet", batchOf(0, 3), "a"); err != nil {
		t.Fatal(err)
	}
	payload := encodeMessage(nil, func() []format.Record {
		b := batchOf(1, 3)
		for i := range b {
			b[i].Seq = uint64(4 + i)
		}
		return b
	}())
	payload[len(payload)-1] ^= 1
	m := &nats.Msg{Subject: Subject("pet"), Data: payload, Header: nats.Header{}}
	m.Header.Set(hdrSeq, "4-6")
	if _, err := l.js.PublishMsg(ctx, m, jetstream.WithExpectLastSequence(1)); err != nil {
		t.Fatal(err)
	}
	_, err := l.Read(ctx, "pet", 1)
	var ce *CorruptionError
	if !errors.As(err, &ce) || ce.StreamSeq != 2 || !errors.Is(err, ErrCorrupt) {
		t.Fatalf("read over a damaged message: %v", err)
	}
}

func TestNames(t *testing.T) {
	names := []string{"pet", "a.b", "a_b", "a_Db", "a__b", "a.db", "a-b", "ab", "a_d.b", "a._b"}
	seen := map[string]string{}
	for _, n := range names {
		s := StreamName(n)
		if o, dup := seen[s]; dup {
			t.Fatalf("%q and %q share stream %s", n, o, s)
		}
		seen[s] = n
		if strings.ContainsAny(s, ". *>/\\") || strings.ContainsAny(Subject(n)[len(subjectPrefix):], ".*> ") {
			t.Fatalf("%q: stream %q or subject %q has a character NATS reserves", n, s, Subject(n))
		}
	}
	if StreamName("EIA.Daily") != StreamName("eia.daily") || Subject("PET") != Subject("pet") {
		t.Fatal("names that differ by case must map to one stream")
	}
	if StreamName("eia.daily") != "ES_DELTA_eia_Ddaily" || Subject("my_set") != "es.delta.my__set" {
		t.Fatalf("documented naming changed: %s %s", StreamName("eia.daily"), Subject("my_set"))
	}
}

// Advance moves the next seq above a snapshot that covers more than the
// log holds: a skip message readers pass over, nothing when the head is
// there already, and a second Log advancing to the same seq logs nothing
// more.
func TestAdvance(t *testing.T) {
	n := startEmbedded(t, NodeOptions{})
	l := connectNode(t, n, Options{})
	other := connectNode(t, n, Options{})
	ctx := testCtx(t, 20*time.Second)
	if err := l.Create(ctx, "pet", CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := l.Append(ctx, "pet", batchOf(0, 3), "a"); err != nil {
		t.Fatal(err)
	}
	if err := l.Advance(ctx, "pet", 40); err != nil {
		t.Fatal(err)
	}
	if err := other.Advance(ctx, "pet", 40); err != nil {
		t.Fatal(err)
	}
	if err := l.Advance(ctx, "pet", 10); err != nil { // below the head: nothing
		t.Fatal(err)
	}
	if h, err := other.Head(ctx, "pet"); err != nil || h != 40 {
		t.Fatalf("head after Advance(40): %d, %v", h, err)
	}
	f, la, err := other.Append(ctx, "pet", batchOf(1, 2), "b")
	if err != nil || f != 41 || la != 42 {
		t.Fatalf("append after Advance: %d..%d, %v; want 41..42", f, la, err)
	}
	info, err := l.js.Stream(ctx, StreamName("pet"))
	if err != nil {
		t.Fatal(err)
	}
	if msgs := info.CachedInfo().State.Msgs; msgs != 3 {
		t.Fatalf("%d messages, want 3 (append, one skip, append)", msgs)
	}
	var seqs []uint64
	for _, from := range []uint64{1, 2, 20, 41} {
		recs, err := l.Read(ctx, "pet", from)
		if err != nil {
			t.Fatalf("read from %d: %v", from, err)
		}
		seqs = seqs[:0]
		for _, r := range recs {
			seqs = append(seqs, r.Seq)
		}
		want := []uint64{1, 2, 3, 41, 42}
		for len(want) > 0 && want[0] < from {
			want = want[1:]
		}
		if !slices.Equal(seqs, want) {
			t.Fatalf("read from %d: seqs %v, want %v", from, seqs, want)
		}
	}
	// Follow passes over the skip too.
	fctx, cancel := context.WithCancel(ctx)
	var got []uint64
	err = l.Follow(fctx, "pet", 3, func(recs []format.Record) error {
		for _, r := range recs {
			got = append(got, r.Seq)
		}
		if got[len(got)-1] == 42 {
			cancel()
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) || !slices.Equal(got, []uint64{3, 41, 42}) {
		t.Fatalf("follow from 3: %v, %v", got, err)
	}
}
