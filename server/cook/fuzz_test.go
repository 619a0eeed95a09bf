package cook

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/ipc"
)

// fuzzFile cooks in as a file of the given extension. Whatever the bytes,
// AddFile must return (no panic, no out-of-memory: allocation is bounded
// by the input) and an error must be an InputError or a file-system error,
// leaving the Builder empty.
func fuzzFile(t *testing.T, in []byte, ext string, wide bool) {
	path := filepath.Join(t.TempDir(), "in"+ext)
	if err := os.WriteFile(path, in, 0o644); err != nil {
		t.Fatal(err)
	}
	o := InputOptions{}
	if wide {
		o = InputOptions{Wide: true, PeriodCol: "period", SkipBad: true}
	}
	b := NewBuilder()
	st, err := b.AddFile(path, o)
	tab := b.Table()
	if err != nil {
		var ie *InputError
		if !errors.As(err, &ie) || !errors.Is(err, ErrBadInput) {
			t.Fatalf("error %v is not an InputError", err)
		}
		if tab.Len() != 0 || len(tab.Series) != 0 {
			t.Fatalf("error %v but the table has %d rows", err, tab.Len())
		}
		return
	}
	if st.Rows != int64(tab.Len()) {
		t.Fatalf("stats %+v, table %d rows", st, tab.Len())
	}
}

// FuzzReadArrow: es cook of an Arrow IPC file or stream (the same reader
// serves PUT /v1/datasets/{name} with an Arrow body).
func FuzzReadArrow(f *testing.F) {
	rec := sampleBatch(f)
	defer rec.Release()
	f.Add(arrowStream(f, rec), false)
	f.Add(arrowFile(f, rec), false)
	f.Add(arrowStream(f, rec, ipc.WithZstd()), false)
	f.Add(arrowFile(f, rec, ipc.WithLZ4()), true)
	for _, in := range forgedArrowInputs(f) {
		f.Add(in, false)
	}
	f.Fuzz(func(t *testing.T, in []byte, wide bool) {
		fuzzFile(t, in, ".arrow", wide)
	})
}

// FuzzReadParquet: es cook of a Parquet file.
func FuzzReadParquet(f *testing.F) {
	f.Add(sampleParquet(f), false)
	f.Add(sampleParquet(f), true)
	for _, in := range forgedParquetInputs(f) {
		f.Add(in, false)
	}
	f.Fuzz(func(t *testing.T, in []byte, wide bool) {
		fuzzFile(t, in, ".parquet", wide)
	})
}
