//go:build linux

package format

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/energyscope/energyscope/localcache/format/tailwrite"
	"golang.org/x/sys/unix"
)

// TestMeasureTailEncodings compares candidate encodings of the cold tier
// on realistic data: bytes per row and decode time per block. It is a
// measurement, not a check; run it with
//
//	ES_MEASURE=1 go test ./localcache/format -run MeasureTail -v
//
// The figures are recorded in FORMAT.md ("Why Parquet").
func TestMeasureTailEncodings(t *testing.T) {
	if os.Getenv("ES_MEASURE") == "" {
		t.Skip("set ES_MEASURE=1 to run")
	}
	for _, intraday := range []bool{false, true}[:measureKinds()] {
		tb := realisticTable(42, 20000, 4_000_000, intraday)
		c := cookRows(tb, nil)
		hot := c.hotBytesPerRow(t)
		t.Logf("%s: %d rows, %d series; data.arrow %.2f B/row", c.periodType, len(c.value), len(c.order), hot)
		variants := []tailwrite.Codec{
			{Name: "delta+bss+zstd", SeriesEnc: tailwrite.V1.SeriesEnc, PeriodEnc: tailwrite.V1.PeriodEnc, ValueEnc: parquet.Encodings.ByteStreamSplit, Codec: compress.Codecs.Zstd, Level: 3},
			tailwrite.V1,
			{Name: "delta+plain+zstd1", SeriesEnc: tailwrite.V1.SeriesEnc, PeriodEnc: tailwrite.V1.PeriodEnc, ValueEnc: tailwrite.V1.ValueEnc, Codec: compress.Codecs.Zstd, Level: 1},
			{Name: "delta+plain+zstd9", SeriesEnc: tailwrite.V1.SeriesEnc, PeriodEnc: tailwrite.V1.PeriodEnc, ValueEnc: tailwrite.V1.ValueEnc, Codec: compress.Codecs.Zstd, Level: 9},
			{Name: "plain+zstd", SeriesEnc: parquet.Encodings.Plain, PeriodEnc: parquet.Encodings.Plain, ValueEnc: parquet.Encodings.Plain, Codec: compress.Codecs.Zstd, Level: 3},
			{Name: "delta+plain+lz4raw", SeriesEnc: tailwrite.V1.SeriesEnc, PeriodEnc: tailwrite.V1.PeriodEnc, ValueEnc: parquet.Encodings.Plain, Codec: compress.Codecs.Lz4Raw},
			{Name: "delta+plain+snappy", SeriesEnc: tailwrite.V1.SeriesEnc, PeriodEnc: tailwrite.V1.PeriodEnc, ValueEnc: parquet.Encodings.Plain, Codec: compress.Codecs.Snappy},
			{Name: "delta+bss+snappy", SeriesEnc: tailwrite.V1.SeriesEnc, PeriodEnc: tailwrite.V1.PeriodEnc, ValueEnc: parquet.Encodings.ByteStreamSplit, Codec: compress.Codecs.Snappy},
			{Name: "delta+plain+none", SeriesEnc: tailwrite.V1.SeriesEnc, PeriodEnc: tailwrite.V1.PeriodEnc, ValueEnc: tailwrite.V1.ValueEnc, Codec: compress.Codecs.Uncompressed},
		}
		for _, blockRows := range []int{1 << 12, 1 << 13, 1 << 14, 1 << 16} {
			c.batches = c.cutBatches(blockRows)
			for _, v := range variants {
				var buf bytes.Buffer
				if err := writeTailCodec(c, &buf, v); err != nil {
					t.Fatal(err)
				}
				tl, err := OpenTail(buf.Bytes(), c.periodType, math.MaxInt64)
				if err != nil {
					t.Fatal(err)
				}
				ar := arrowTail(t, buf.Bytes())
				// Every candidate is decoded with arrow-go's column readers
				// (the library a third party would use); the chosen
				// encoding also with our page decoder (Tail.Block).
				p50, p90 := timeBlocks(t, tl.NumBlocks, func(i int) error { return tl.blockArrowGo(ar, i) })
				bpr := float64(buf.Len()) / float64(len(c.value))
				t.Logf("  %6d rows/block  parquet %-18s %5.2f B/row (%.3fx hot)  decode/block p50 %4d µs p90 %4d µs (arrow-go reader)",
					blockRows, v.Name, bpr, bpr/hot, p50.Microseconds(), p90.Microseconds())
				if v == tailwrite.V1 {
					p50, p90 := timeBlocks(t, tl.NumBlocks, func(i int) error { _, err := tl.Block(i); return err })
					t.Logf("  %6d rows/block  parquet %-18s %5.2f B/row (%.3fx hot)  decode/block p50 %4d µs p90 %4d µs (Tail.Block)",
						blockRows, v.Name, bpr, bpr/hot, p50.Microseconds(), p90.Microseconds())
				}
			}
			size, dec := c.arrowZstd(t)
			t.Logf("  %6d rows/block  arrow-ipc zstd      %5.2f B/row (%.3fx hot)  decode/block p50 %4d µs p90 %4d µs",
				blockRows, size, size/hot, dec[0].Microseconds(), dec[1].Microseconds())
		}
	}
}

func threadCPU() time.Duration {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts)
	return time.Duration(ts.Nano())
}

func (c *cooked) hotBytesPerRow(t *testing.T) float64 {
	c.batches = c.cutBatches(1 << 20)
	fi, err := writeArrow(dirSink(t.TempDir()), DataFile, DataSchema(c.periodType), func(w *ipc.FileWriter) error { return c.writeData(w) })
	if err != nil {
		t.Fatal(err)
	}
	return float64(fi.Size) / float64(len(c.value))
}

// timeBlocks decodes every block several times and returns the p50 and p90
// of the per-block CPU time of the decoding thread (the machine may be
// shared: wall time would measure the neighbours).
func timeBlocks(t *testing.T, n int, decode func(int) error) (p50, p90 time.Duration) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	runtime.GC()
	var ds []time.Duration
	for range 3 {
		for i := range n {
			st := threadCPU()
			if err := decode(i); err != nil {
				t.Fatal(err)
			}
			ds = append(ds, threadCPU()-st)
		}
	}
	slices.Sort(ds)
	return ds[len(ds)/2], ds[len(ds)*9/10]
}

// arrowZstd writes c.batches as an Arrow IPC file with ZSTD body
// compression and times decoding a batch into Go slices.
func (c *cooked) arrowZstd(t *testing.T) (float64, [2]time.Duration) {
	var buf bytes.Buffer
	w, err := ipc.NewFileWriter(&buf, ipc.WithSchema(DataSchema(c.periodType)), ipc.WithZstd(), ipc.WithAllocator(memory.NewGoAllocator()))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.writeData(w); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := ipc.NewFileReader(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	p50, p90 := timeBlocks(t, r.NumRecords(), func(i int) error {
		rec, err := r.RecordBatchAt(i)
		if err != nil {
			return err
		}
		// Copy out like the Parquet path does (the cache holds Go slices).
		v := slices.Clone(rec.Column(DataValue).(*array.Float64).Float64Values())
		switch p := rec.Column(DataPeriod).(type) {
		case *array.Date32:
			_ = slices.Clone(p.Date32Values())
		case *array.Timestamp:
			_ = slices.Clone(p.TimestampValues())
		}
		_ = v
		rec.Release()
		return nil
	})
	return float64(buf.Len()) / float64(len(c.value)), [2]time.Duration{p50, p90}
}

var _ = arrow.PrimitiveTypes.Uint32
var _ = fmt.Sprint

var probeOnce sync.Once
var probeTail *Tail

func BenchmarkTailBlockDecodeProbe(b *testing.B) {
	probeOnce.Do(func() {
		tb := realisticTable(42, 4000, 800_000, false)
		c := cookRows(tb, nil)
		c.batches = c.cutBatches(TailBlockRows)
		v := tailwrite.V1
		if os.Getenv("ES_PROBE_CODEC") == "none" {
			v.Codec = compress.Codecs.Uncompressed
		}
		var buf bytes.Buffer
		if err := writeTailCodec(c, &buf, v); err != nil {
			b.Fatal(err)
		}
		var err error
		probeTail, err = OpenTail(buf.Bytes(), c.periodType, math.MaxInt64)
		if err != nil {
			b.Fatal(err)
		}
	})
	tl := probeTail
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := tl.Block(i % tl.NumBlocks); err != nil {
			b.Fatal(err)
		}
	}
}

func measureKinds() int {
	if os.Getenv("ES_MEASURE") == "all" {
		return 2
	}
	return 1
}

// blockArrowGo decodes row group i's period and value columns with
// arrow-go's typed column readers, into fresh slices like Block.
func (t *Tail) blockArrowGo(r *file.Reader, i int) error {
	n := t.blockRows[i]
	rg := r.RowGroup(i)
	if t.pt == PeriodTimestamp {
		if err := readColumn(rg, i, tailPeriod, make([]int64, n)); err != nil {
			return err
		}
	} else if err := readColumn(rg, i, tailPeriod, make([]int32, n)); err != nil {
		return err
	}
	return readColumn(r.RowGroup(i), i, tailValue, make([]float64, n))
}
