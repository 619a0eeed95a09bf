package format

import "testing"

// A manifest whose batch count disagrees with data.arrow must be refused
// with an error, not a panic.
func TestOpenDataBatchCountMismatch(t *testing.T) {
	dir, m := writeSnap(t, goldenTable(false), WriteOptions{BatchRows: 16})
	b := aligned(readFile(t, dir, DataFile))
	for _, n := range []int{0, m.Batches - 1, m.Batches + 1, 1 << 20} {
		d, err := OpenData(b, m.PeriodType, n)
		if err == nil {
			d.Close()
			t.Fatalf("OpenData with %d batches (file has %d) succeeded", n, m.Batches)
		}
		wantCorruption(t, err, DataFile)
	}
	d, err := OpenData(b, m.PeriodType, m.Batches)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for _, i := range []int{-1, m.Batches} {
		if _, err := d.Batch(i); err == nil {
			t.Errorf("Batch(%d) of %d succeeded", i, m.Batches)
		}
	}
}
