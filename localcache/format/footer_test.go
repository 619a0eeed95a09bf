package format

import (
	"encoding/binary"
	"testing"
)

// footerOf returns the footer flatbuffer of an Arrow IPC file, as a view
// into b.
func footerOf(t *testing.T, b []byte) fbuf {
	t.Helper()
	size := int(binary.LittleEndian.Uint32(b[len(b)-10:]))
	return fbuf(b[len(b)-10-size : len(b)-10])
}

// fieldPos returns the position of slot of the table at t, failing if
// absent.
func fieldPos(t *testing.T, fb fbuf, table uint32, slot uint16) uint32 {
	t.Helper()
	p, ok := fb.field(table, slot)
	if !ok || p == 0 {
		t.Fatalf("slot %d of table at %d missing", slot, table)
	}
	return p
}

// TestOpenArrowFooterDamage damages specific footer fields of real files.
// Each used to kill or panic the process inside arrow-go: a huge vector
// length made schemaFromFB allocate hundreds of gigabytes (a fatal error,
// not a panic) and a bad recordBatches offset made NumRecords panic outside
// any recover.
func TestOpenArrowFooterDamage(t *testing.T) {
	dir, m := writeSnap(t, goldenTable(false), WriteOptions{BatchRows: 16})
	files := []struct {
		name string
		open func(b []byte) error
	}{
		{IndexFile, func(b []byte) error {
			x, err := OpenIndex(b, m.PeriodType, m.Series)
			if err == nil {
				x.Close()
			}
			return err
		}},
		{DataFile, func(b []byte) error {
			d, err := OpenData(b, m.PeriodType, m.Batches)
			if err == nil {
				d.Close()
			}
			return err
		}},
	}
	damage := []struct {
		name string
		// at returns the position in the footer of a uint32 to overwrite.
		at    func(t *testing.T, fb fbuf) uint32
		value uint32
	}{
		{"fields vector length", func(t *testing.T, fb fbuf) uint32 {
			root, _ := fb.u32(0)
			schema, _ := fb.indirect(fieldPos(t, fb, root, 6))
			v, _ := fb.indirect(fieldPos(t, fb, schema, 6))
			return v
		}, 0x7fff_fff0},
		{"schema metadata length", func(t *testing.T, fb fbuf) uint32 {
			root, _ := fb.u32(0)
			schema, _ := fb.indirect(fieldPos(t, fb, root, 6))
			v, _ := fb.indirect(fieldPos(t, fb, schema, 8))
			return v
		}, 0x1000_0000},
		{"recordBatches offset", func(t *testing.T, fb fbuf) uint32 {
			root, _ := fb.u32(0)
			return fieldPos(t, fb, root, 10)
		}, 0x7fff_0000},
		{"schema offset", func(t *testing.T, fb fbuf) uint32 {
			root, _ := fb.u32(0)
			return fieldPos(t, fb, root, 6)
		}, 0xffff_fff0},
		{"root offset", func(t *testing.T, fb fbuf) uint32 { return 0 }, 0xffff_ff00},
	}
	for _, f := range files {
		orig := readFile(t, dir, f.name)
		for _, d := range damage {
			t.Run(f.name+"/"+d.name, func(t *testing.T) {
				b := aligned(orig)
				fb := footerOf(t, b)
				binary.LittleEndian.PutUint32(fb[d.at(t, fb):], d.value)
				err := f.open(b)
				if err == nil {
					t.Fatal("opened a damaged file")
				}
				wantCorruption(t, err, f.name)
			})
		}
		if err := f.open(aligned(orig)); err != nil {
			t.Fatalf("undamaged %s: %v", f.name, err)
		}
	}
}

// The guard must accept what the writer produces for every shape we cook.
func TestCheckFooterAcceptsOurFiles(t *testing.T) {
	for _, s := range fuzzSnapshots(t) {
		for _, b := range [][]byte{s.data, s.index} {
			if err := checkFooter(b); err != nil {
				t.Fatalf("%s: %v", s.m.SnapshotID, err)
			}
		}
	}
	for _, b := range [][]byte{nil, []byte("ARROW1"), make([]byte, 64)} {
		_ = checkFooter(b) // short or footerless input: no panic
	}
}
