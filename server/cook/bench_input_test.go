//go:build unix

package cook

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// benchTable is the PET-shaped long table of BenchmarkReadCSVLong as Arrow
// record batches of 64K rows: series_id utf8, period date32, value float64.
func benchTable(nSeries, rowsPer int) []arrow.RecordBatch {
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "series_id", Type: arrow.BinaryTypes.String},
		{Name: "period", Type: arrow.FixedWidthTypes.Date32},
		{Name: "value", Type: arrow.PrimitiveTypes.Float64},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer b.Release()
	var out []arrow.RecordBatch
	n := 0
	for s := range nSeries {
		id := "PET.EMM_EPM" + strconv.Itoa(10000+s) + "_PTE_NUS_DPG.W"
		for i := range rowsPer {
			b.Field(0).(*array.StringBuilder).Append(id)
			b.Field(1).(*array.Date32Builder).Append(arrow.Date32(10957 + 7*i))
			b.Field(2).(*array.Float64Builder).Append(float64((s*7919+i*104729)%1000000) / 1000)
			if n++; n%(64<<10) == 0 {
				out = append(out, b.NewRecordBatch())
			}
		}
	}
	if n%(64<<10) != 0 {
		out = append(out, b.NewRecordBatch())
	}
	return out
}

// benchFile writes the bench table as ext (.arrow file, .arrows stream,
// .parquet) and returns its path and size.
func benchFile(b *testing.B, ext string) (string, int64) {
	recs := benchTable(10000, 100) // 1M rows
	path := filepath.Join(b.TempDir(), "bench"+ext)
	var buf bytes.Buffer
	sc := recs[0].Schema()
	type writer interface {
		Write(arrow.RecordBatch) error
		Close() error
	}
	var w writer
	var err error
	switch ext {
	case ".parquet":
		w, err = pqarrow.NewFileWriter(sc, &buf, parquet.NewWriterProperties(parquet.WithMaxRowGroupLength(1<<20)), pqarrow.DefaultWriterProps())
	case ".arrows":
		w = ipc.NewWriter(&buf, ipc.WithSchema(sc))
	default:
		w, err = ipc.NewFileWriter(&buf, ipc.WithSchema(sc))
	}
	if err != nil {
		b.Fatal(err)
	}
	for _, r := range recs {
		if err := w.Write(r); err != nil {
			b.Fatal(err)
		}
		r.Release()
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		b.Fatal(err)
	}
	return path, int64(buf.Len())
}

func benchAddFile(b *testing.B, ext string) {
	path, size := benchFile(b, ext)
	b.SetBytes(size)
	b.ReportAllocs()
	rows := int64(0)
	cpu0 := cpuTime()
	for b.Loop() {
		bl := NewBuilder()
		st, err := bl.AddFile(path, InputOptions{})
		if err != nil {
			b.Fatal(err)
		}
		rows += st.Rows
	}
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(rows), "cpu-ns/row")
	b.ReportMetric(float64(rows)/b.Elapsed().Seconds(), "rows/s")
}

func BenchmarkReadCSVLongCPU(b *testing.B) {
	data := genLongCSV(10000, 100) // 1M rows, as BenchmarkReadCSVLong
	b.SetBytes(int64(len(data)))
	rows := int64(0)
	cpu0 := cpuTime()
	for b.Loop() {
		st, err := NewBuilder().AddCSV(bytes.NewReader(data), "bench.csv", InputOptions{})
		if err != nil {
			b.Fatal(err)
		}
		rows += st.Rows
	}
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(rows), "cpu-ns/row")
}

func BenchmarkReadArrowFile(b *testing.B)   { benchAddFile(b, ".arrow") }
func BenchmarkReadArrowStream(b *testing.B) { benchAddFile(b, ".arrows") }
func BenchmarkReadParquet(b *testing.B)     { benchAddFile(b, ".parquet") }

// cpuTime is the user + system CPU time of the process: on this shared,
// loaded machine wall time per op swings with the neighbours, CPU time
// much less.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
