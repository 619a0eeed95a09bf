package format

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/energyscope/energyscope/localcache/format/tailwrite"
)

// TestDecodeColumnMatchesArrowGo decodes columns with our page decoder and
// with arrow-go's typed column readers and requires the same values, over
// awkward inputs: lengths around the block and miniblock sizes, constant
// steps, random steps, full-range values whose deltas wrap around.
func TestDecodeColumnMatchesArrowGo(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 41))
	gens := map[string]func(i int) int64{
		"constant step": func(i int) int64 { return int64(i) * 7 },
		"small steps":   func(i int) int64 { return int64(i*30 + rng.IntN(3)) },
		"negative":      func(i int) int64 { return -int64(i)*86400 - int64(rng.IntN(5)) },
		"full range":    func(int) int64 { return int64(rng.Uint64()) },
		"extremes": func(i int) int64 {
			return []int64{math.MinInt64, math.MaxInt64, 0, -1, math.MinInt32, math.MaxInt32}[i%6]
		},
		"same": func(int) int64 { return 42 },
	}
	for name, gen := range gens {
		for _, n := range []int{1, 2, 31, 32, 33, 127, 128, 129, 1000, 8192, 9001} {
			for _, pt := range []PeriodType{PeriodDate32, PeriodTimestamp} {
				c := &cooked{order: []uint32{0}, start: []int64{0, int64(n)}, periodType: pt, batches: []batchSpan{{0, 1}}}
				for i := range n {
					v := gen(i)
					c.series = append(c.series, uint32(v))
					c.value = append(c.value, math.Float64frombits(uint64(v)))
					if pt == PeriodTimestamp {
						c.secs = append(c.secs, v)
					} else {
						c.days = append(c.days, int32(v))
					}
				}
				var buf bytes.Buffer
				if err := writeTailCodec(c, &buf, tailwrite.V1); err != nil {
					t.Fatal(err)
				}
				tl, err := OpenTail(buf.Bytes(), pt, math.MaxInt64)
				if err != nil {
					t.Fatal(err)
				}
				ar := arrowTail(t, buf.Bytes())
				dec := func(col int, dst any) error {
					cc, err := ar.MetaData().RowGroup(0).ColumnChunk(col)
					if err != nil {
						return err
					}
					ref := chunkRef{off: cc.DataPageOffset(), size: cc.TotalCompressedSize(), codec: int32(cc.Compression())}
					switch d := dst.(type) {
					case []int32:
						return decodeChunk(tl.b, ref, 0, col, d)
					case []int64:
						return decodeChunk(tl.b, ref, 0, col, d)
					case []float64:
						return decodeChunk(tl.b, ref, 0, col, d)
					}
					return nil
				}
				check := func(what string, ok bool) {
					if !ok {
						t.Fatalf("%s, n=%d, %s: %s differs from arrow-go", name, n, pt, what)
					}
				}
				s1, s2 := make([]int32, n), make([]int32, n)
				if err := dec(tailSeries, s1); err != nil {
					t.Fatal(err)
				}
				if err := readColumn(ar.RowGroup(0), 0, tailSeries, s2); err != nil {
					t.Fatal(err)
				}
				check("series", slices.Equal(s1, s2))
				if pt == PeriodTimestamp {
					p1, p2 := make([]int64, n), make([]int64, n)
					if err := dec(tailPeriod, p1); err != nil {
						t.Fatal(err)
					}
					if err := readColumn(ar.RowGroup(0), 0, tailPeriod, p2); err != nil {
						t.Fatal(err)
					}
					check("period", slices.Equal(p1, p2))
				} else {
					p1, p2 := make([]int32, n), make([]int32, n)
					if err := dec(tailPeriod, p1); err != nil {
						t.Fatal(err)
					}
					if err := readColumn(ar.RowGroup(0), 0, tailPeriod, p2); err != nil {
						t.Fatal(err)
					}
					check("period", slices.Equal(p1, p2) && slices.Equal(p1, c.days))
				}
				v1, v2 := make([]float64, n), make([]float64, n)
				if err := dec(tailValue, v1); err != nil {
					t.Fatal(err)
				}
				if err := readColumn(ar.RowGroup(0), 0, tailValue, v2); err != nil {
					t.Fatal(err)
				}
				for i := range v1 {
					check("value", math.Float64bits(v1[i]) == math.Float64bits(v2[i]))
				}
			}
		}
	}
}

// Truncated or garbled pages give errors, never panics or hangs.
func TestDecodeDeltaGarbage(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 9))
	c := &cooked{order: []uint32{0}, start: []int64{0, 3000}, periodType: PeriodDate32, batches: []batchSpan{{0, 1}}}
	for i := range 3000 {
		c.series = append(c.series, 0)
		c.days = append(c.days, int32(i*31+rng.IntN(4)))
		c.value = append(c.value, 1)
	}
	var buf bytes.Buffer
	if err := writeTailCodec(c, &buf, parquetNoCompression()); err != nil {
		t.Fatal(err)
	}
	pr, err := arrowTail(t, buf.Bytes()).RowGroup(0).GetColumnPageReader(tailPeriod)
	if err != nil || !pr.Next() {
		t.Fatal(err)
	}
	page := slices.Clone(pr.Page().Data())
	out := make([]int32, 3000)
	if err := decodeDelta(page, out, 32); err != nil || !slices.Equal(out, c.days) {
		t.Fatalf("clean page: %v", err)
	}
	for range 2000 {
		b := slices.Clone(page)
		switch rng.IntN(3) {
		case 0:
			b = b[:rng.IntN(len(b))]
		case 1:
			b[rng.IntN(len(b))] ^= byte(1 + rng.IntN(255))
		default:
			b[rng.IntN(min(len(b), 16))] = 0xff
		}
		decodeDelta(b, out, 32) // must return
	}
}

func parquetNoCompression() tailwrite.Codec {
	c := tailwrite.V1
	c.Codec = compress.Codecs.Uncompressed
	return c
}

// Flipped bytes anywhere in tail.parquet make Block fail or return
// something; they never hang, crash or make it allocate without bound.
func TestTailBlockGarbage(t *testing.T) {
	tb := realisticTable(3, 60, 30_000, true)
	dir, m := writeSnap(t, tb, WriteOptions{Tail: TailList(tb.Series[0].ID, tb.Series[5].ID, tb.Series[9].ID, tb.Series[30].ID)})
	orig := readFile(t, dir, TailFile)
	rng := rand.New(rand.NewPCG(1, 2))
	// Half the flips land in the footer (thrift metadata parsed by
	// arrow-go), half anywhere.
	footer := int(binary.LittleEndian.Uint32(orig[len(orig)-8:])) + 8
	for k := range scaledN(4000) {
		b := slices.Clone(orig)
		for range 1 + rng.IntN(3) {
			pos := rng.IntN(len(b))
			if k%2 == 0 {
				pos = len(b) - 1 - rng.IntN(footer)
			}
			b[pos] ^= byte(1 + rng.IntN(255))
		}
		tl, err := OpenTail(b, m.PeriodType, m.Rows)
		if err != nil {
			continue
		}
		for i := range tl.NumBlocks {
			if blk, err := tl.Block(i); err == nil && int64(blk.Len()) != tl.BlockRows(i) {
				t.Fatalf("block %d: %d rows, footer says %d", i, blk.Len(), tl.BlockRows(i))
			}
		}
	}
}

func scaledN(n int) int {
	if testing.Short() {
		return n / 10
	}
	return n
}

// FuzzOpenTail: any bytes given as tail.parquet are refused or read; never
// a panic, a hang or an allocation beyond what maxRows allows.
func FuzzOpenTail(f *testing.F) {
	for _, intraday := range []bool{false, true} {
		tb := realisticTable(4, 30, 6000, intraday)
		var ids []string
		for _, s := range tb.Series[:10] {
			ids = append(ids, s.ID)
		}
		dir, _ := writeSnap(f, tb, WriteOptions{Tail: TailList(ids...)})
		f.Add(readFile(f, dir, TailFile), intraday)
	}
	f.Fuzz(func(t *testing.T, b []byte, intraday bool) {
		pt := PeriodDate32
		if intraday {
			pt = PeriodTimestamp
		}
		tl, err := OpenTail(b, pt, 1<<20)
		if err != nil {
			return
		}
		for i := range tl.NumBlocks {
			if blk, err := tl.Block(i); err == nil && int64(blk.Len()) != tl.BlockRows(i) {
				t.Fatalf("block %d: %d rows, footer says %d", i, blk.Len(), tl.BlockRows(i))
			}
		}
	})
}
