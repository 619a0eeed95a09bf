package format

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/schema"
	"github.com/energyscope/energyscope/localcache/format/internal/tailhook"
	"github.com/energyscope/energyscope/localcache/format/tailwrite"
)

// arrow-go's Parquet reader, for the tests that compare our hand-written
// footer and page decoders with it. The package itself does not link it
// (see tail_footer.go and TestReadPathLinksNoParquet).

func arrowTail(t testing.TB, b []byte) *file.Reader {
	t.Helper()
	r, err := file.NewParquetReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// arrowTailLayout is what OpenTail used to take from arrow-go's metadata
// reader: rows per row group and the column chunks' positions, after the
// same file-metadata and schema checks.
func arrowTailLayout(b []byte, pt PeriodType) (rows []int64, chunks [][3]chunkRef, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("parquet reader: %v", p)
		}
	}()
	r, err := file.NewParquetReader(bytes.NewReader(b))
	if err != nil {
		return nil, nil, err
	}
	fmd := r.MetaData()
	kv := fmd.KeyValueMetadata()
	if v := kv.FindValue(metaFileKey); v == nil || *v != "tail" {
		return nil, nil, errors.New("not an energyscope tail file")
	}
	if v := kv.FindValue(metaVersionKey); v == nil || *v != strconv.Itoa(fileVersion) {
		return nil, nil, errors.New("format version mismatch")
	}
	want, err := tailwrite.Schema(pt == PeriodTimestamp)
	if err != nil {
		return nil, nil, err
	}
	if !fmd.Schema.Equals(schema.NewSchema(want)) {
		return nil, nil, fmt.Errorf("schema %s", fmd.Schema)
	}
	for i := range r.NumRowGroups() {
		rg := fmd.RowGroup(i)
		rows = append(rows, rg.NumRows())
		var c [3]chunkRef
		for col := range 3 {
			cc, err := rg.ColumnChunk(col)
			if err != nil {
				return nil, nil, err
			}
			if cc.HasDictionaryPage() {
				return nil, nil, errors.New("dictionary page")
			}
			c[col] = chunkRef{off: cc.DataPageOffset(), size: cc.TotalCompressedSize(), codec: int32(cc.Compression())}
		}
		chunks = append(chunks, c)
	}
	return rows, chunks, nil
}

// sameTailLayout fails t when OpenTail's view of b differs from arrow-go's
// (both accepted b).
func sameTailLayout(t *testing.T, what string, tl *Tail, rows []int64, chunks [][3]chunkRef) {
	t.Helper()
	if !slices.Equal(tl.blockRows, rows) {
		t.Fatalf("%s: row groups %v, arrow-go %v", what, tl.blockRows, rows)
	}
	if !slices.Equal(tl.chunks, chunks) {
		t.Fatalf("%s: chunks %v, arrow-go %v", what, tl.chunks, chunks)
	}
}

// TestTailFooterMatchesArrowGo: on every shape of tail the writer makes
// (date / timestamp periods, one to many row groups, every codec and
// encoding the measurement tries), the hand-written footer decoder finds
// the row groups and column chunks arrow-go's metadata reader finds, and
// accepts exactly what it accepts with the other period type.
func TestTailFooterMatchesArrowGo(t *testing.T) {
	codecs := []tailwrite.Codec{tailwrite.V1, parquetNoCompression()}
	for _, intraday := range []bool{false, true} {
		for _, nseries := range []int{1, 7, 120} {
			tb := realisticTable(uint64(nseries), nseries, int64(200*nseries), intraday)
			c := cookRows(tb, nil)
			for _, blockRows := range []int{64, TailBlockRows} {
				c.batches = c.cutBatches(blockRows)
				for _, tc := range codecs {
					var buf bytes.Buffer
					if err := writeTailCodec(c, &buf, tc); err != nil {
						t.Fatal(err)
					}
					what := fmt.Sprintf("intraday=%v series=%d block=%d %s", intraday, nseries, blockRows, tc.Name)
					for _, pt := range []PeriodType{PeriodDate32, PeriodTimestamp} {
						rows, chunks, aerr := arrowTailLayout(buf.Bytes(), pt)
						tl, err := OpenTail(buf.Bytes(), pt, math.MaxInt64)
						if (err == nil) != (aerr == nil) {
							t.Fatalf("%s as %s: OpenTail %v, arrow-go %v", what, pt, err, aerr)
						}
						if err != nil {
							var ce *CorruptionError
							if !errors.As(err, &ce) {
								t.Fatalf("%s as %s: %v is not a CorruptionError", what, pt, err)
							}
							continue
						}
						sameTailLayout(t, what, tl, rows, chunks)
						if len(rows) != len(c.batches) {
							t.Fatalf("%s: %d row groups, wrote %d", what, len(rows), len(c.batches))
						}
						// The series column decodes as arrow-go reads it.
						r := arrowTail(t, buf.Bytes())
						for i := range tl.NumBlocks {
							got, err := tl.BlockSeries(i)
							if err != nil {
								t.Fatal(err)
							}
							want := make([]int32, rows[i])
							if err := readColumn(r.RowGroup(i), i, tailSeries, want); err != nil {
								t.Fatal(err)
							}
							if !slices.Equal(got, unsafeCast[int32, uint32](want)) {
								t.Fatalf("%s: block %d series differ", what, i)
							}
						}
					}
				}
			}
		}
	}
	// A codec the reader does not decode opens (the footer is fine) and
	// the block is refused with a CorruptionError naming it.
	tb := realisticTable(3, 5, 400, false)
	c := cookRows(tb, nil)
	c.batches = c.cutBatches(TailBlockRows)
	snappy := tailwrite.V1
	snappy.Codec = compress.Codecs.Snappy
	var buf bytes.Buffer
	if err := writeTailCodec(c, &buf, snappy); err != nil {
		t.Fatal(err)
	}
	tl, err := OpenTail(buf.Bytes(), PeriodDate32, math.MaxInt64)
	if err != nil {
		t.Fatal(err)
	}
	rows, chunks, err := arrowTailLayout(buf.Bytes(), PeriodDate32)
	if err != nil {
		t.Fatal(err)
	}
	sameTailLayout(t, "snappy", tl, rows, chunks)
	var ce *CorruptionError
	if _, err := tl.Block(0); !errors.As(err, &ce) {
		t.Fatalf("snappy block: %v, want a CorruptionError", err)
	}
}

// FuzzTailFooter: damaged tail.parquet footers. Whenever both the
// hand-written decoder and arrow-go's metadata reader accept the bytes,
// they agree on the row groups and column chunks; the decoder never
// panics.
func FuzzTailFooter(f *testing.F) {
	for _, intraday := range []bool{false, true} {
		tb := realisticTable(5, 12, 3000, intraday)
		c := cookRows(tb, nil)
		c.batches = c.cutBatches(256)
		var buf bytes.Buffer
		if err := writeTailCodec(c, &buf, tailwrite.V1); err != nil {
			f.Fatal(err)
		}
		f.Add(buf.Bytes(), intraday)
	}
	f.Fuzz(func(t *testing.T, b []byte, intraday bool) {
		pt := PeriodDate32
		if intraday {
			pt = PeriodTimestamp
		}
		tl, err := OpenTail(b, pt, 1<<20)
		if err != nil {
			var ce *CorruptionError
			if !errors.As(err, &ce) {
				t.Fatalf("%v is not a CorruptionError", err)
			}
			return
		}
		rows, chunks, aerr := arrowTailLayout(b, pt)
		if aerr != nil {
			return // arrow-go is stricter about fields the reader does not use
		}
		sameTailLayout(t, "fuzz", tl, rows, chunks)
	})
}

// readColumn reads all n = len(dst) values of column col of a row group
// with arrow-go's typed column readers.
func readColumn[T int32 | int64 | float64](rg *file.RowGroupReader, i, col int, dst []T) error {
	cr, err := rg.Column(col)
	if err != nil {
		return corrupt(TailFile, -1, "row group %d column %d: %v", i, col, err)
	}
	n := int64(len(dst))
	var got int64
	for got < n {
		var k int64
		switch r := any(cr).(type) {
		case *file.Int32ColumnChunkReader:
			d, ok := any(dst).([]int32)
			if !ok {
				return corrupt(TailFile, -1, "row group %d column %d: unexpected type", i, col)
			}
			k, _, err = r.ReadBatch(n-got, d[got:], nil, nil)
		case *file.Int64ColumnChunkReader:
			d, ok := any(dst).([]int64)
			if !ok {
				return corrupt(TailFile, -1, "row group %d column %d: unexpected type", i, col)
			}
			k, _, err = r.ReadBatch(n-got, d[got:], nil, nil)
		case *file.Float64ColumnChunkReader:
			d, ok := any(dst).([]float64)
			if !ok {
				return corrupt(TailFile, -1, "row group %d column %d: unexpected type", i, col)
			}
			k, _, err = r.ReadBatch(n-got, d[got:], nil, nil)
		default:
			return corrupt(TailFile, -1, "row group %d column %d: unexpected reader %T", i, col, cr)
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return corrupt(TailFile, -1, "row group %d column %d: %v", i, col, err)
		}
		if k == 0 {
			return corrupt(TailFile, -1, "row group %d column %d: %d values, want %d", i, col, got, n)
		}
		got += k
	}
	return nil
}

// writeTailCodec writes c's rows like writeTail, encoded with tc.
func writeTailCodec(c *cooked, w io.Writer, tc tailwrite.Codec) error {
	return tailwrite.Write(w, c.periodType == PeriodTimestamp, tailKV(), c.tailGroups(), tc)
}

// TestWriteWithoutTailWriter: in a binary that does not link tailwrite,
// Write refuses a cold tier with ErrNoTailWriter and leaves no directory
// behind; a snapshot without a cold tier is written as usual.
func TestWriteWithoutTailWriter(t *testing.T) {
	saved := tailhook.Write
	tailhook.Write = nil
	defer func() { tailhook.Write = saved }()
	tb := goldenTable(false)
	dir := filepath.Join(t.TempDir(), "snap")
	_, _, err := Write(dir, tb, WriteOptions{Dataset: "test", Created: time.Unix(1700000000, 0), Tail: TailList(tb.Series[0].ID)})
	if !errors.Is(err, ErrNoTailWriter) {
		t.Fatalf("Write with a cold tier and no tail writer: %v, want ErrNoTailWriter", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("refused Write left %s behind: %v", dir, err)
	}
	dir, m := writeSnap(t, tb, WriteOptions{})
	if m.HotSeries != m.Series {
		t.Fatalf("%d of %d series hot", m.HotSeries, m.Series)
	}
	if _, err := Verify(dir); err != nil {
		t.Fatal(err)
	}
}
