package format

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A snapshot written into a Container holds, at ContainerAlign offsets
// after the creator's header, exactly the bytes Write puts in a
// directory (Write and WriteSorted alike), with zeros in the gaps; the
// manifest is the same. (Every file starts its writeback in the
// background here: the race detector watches it.)
func TestWriteIntoContainerMatchesDirectory(t *testing.T) {
	defer func(n int64) { syncAheadMin = n }(syncAheadMin)
	syncAheadMin = 1
	for _, c := range []struct {
		name   string
		hourly bool
		tail   bool
	}{{"date32", false, false}, {"timestamp", true, false}, {"tail", false, true}} {
		t.Run(c.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(7, 0))
			tb := randomTable(rng, 60, 50, c.hourly)
			o := WriteOptions{Dataset: "test", Epoch: 2, CoversThroughSeq: 5, BatchRows: 40, Created: time.Unix(1700000000, 0)}
			if c.tail {
				o.Tail = TailList(tb.Series[0].ID, tb.Series[3].ID)
			}
			dir, want := writeSnap(t, tb, o)

			header := []byte("HEAD")
			path := filepath.Join(t.TempDir(), "c.bin")
			ct, err := CreateContainer(path, header)
			if err != nil {
				t.Fatal(err)
			}
			got, _, err := WriteInto(ct, tb, o)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := ct.Append([]byte("TRAILER")); err != nil {
				t.Fatal(err)
			}
			if err := errors.Join(ct.Durable(), ct.Close()); err != nil {
				t.Fatal(err)
			}
			if got.SnapshotID != want.SnapshotID {
				t.Fatalf("snapshot %s, the directory's %s", got.SnapshotID, want.SnapshotID)
			}
			checkContainer(t, path, ct, dir, header, len(want.Files)+1)

			// The sorted writer (compaction's) into a container: same bytes.
			if c.tail {
				return // a SortedTable keeps each series' tier: covered by the directory tests
			}
			st := sortedFrom(tb)
			path2 := filepath.Join(t.TempDir(), "c2.bin")
			ct2, err := CreateContainer(path2, header)
			if err != nil {
				t.Fatal(err)
			}
			o2 := o
			o2.Tail = nil
			got2, _, err := WriteSortedInto(ct2, st, o2)
			if err != nil {
				t.Fatal(err)
			}
			ct2.Close()
			if got2.SnapshotID != want.SnapshotID {
				t.Fatalf("sorted: snapshot %s, the directory's %s", got2.SnapshotID, want.SnapshotID)
			}
			checkContainer(t, path2, ct2, dir, header, len(want.Files)+1)

			// A container takes one snapshot.
			if _, _, err := WriteInto(ct2, tb, o); !errors.Is(err, errContainerUsed) {
				t.Fatalf("second snapshot into one container: %v", err)
			}
		})
	}
}

func checkContainer(t *testing.T, path string, ct *Container, dir string, header []byte, files int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b, header) {
		t.Fatalf("container starts %q", b[:8])
	}
	placed := ct.Files()
	if len(placed) != files {
		t.Fatalf("%d files placed, want %d: %+v", len(placed), files, placed)
	}
	end := int64(len(header))
	for _, p := range placed {
		if p.Offset%ContainerAlign != 0 {
			t.Errorf("%s at offset %d: not aligned", p.Name, p.Offset)
		}
		if !bytes.Equal(b[end:p.Offset], make([]byte, p.Offset-end)) {
			t.Errorf("gap before %s is not zeros", p.Name)
		}
		if !bytes.Equal(b[p.Offset:p.Offset+p.Length], readFile(t, dir, p.Name)) {
			t.Errorf("%s differs from the directory's", p.Name)
		}
		end = p.Offset + p.Length
	}
	if string(b[end:]) != "TRAILER" && string(b[end:]) != "" {
		t.Errorf("after the files: %q", b[end:])
	}
}

// sortedFrom is tb's rows as Write cooks them, in a SortedTable.
func sortedFrom(tb *Table) *SortedTable {
	c := cookRows(tb, nil)
	st := NewSortedTable(c.periodType, len(c.order), len(c.value))
	for r, si := range c.order {
		meta := tb.Series[si]
		meta.Frequency = c.freq[r]
		st.AddSeries(meta)
		lo, hi := c.start[r], c.start[r+1]
		if c.periodType == PeriodTimestamp {
			st.AppendSecs(c.secs[lo:hi], c.value[lo:hi])
		} else {
			st.AppendDays(c.days[lo:hi], c.value[lo:hi])
		}
	}
	return st
}
