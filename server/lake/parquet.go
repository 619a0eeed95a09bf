package lake

import (
	"context"
	"fmt"
	"io"
	"runtime/debug"

	"github.com/google/uuid"

	iceio "github.com/apache/iceberg-go/io"

	"github.com/energyscope/energyscope/localcache/format"
)

// The data file is written here (pqwrite.go lays out its bytes), not by
// iceberg-go's writer: no per-row string is hashed or copied, row groups
// are cut at series boundaries. FORMAT.md, "The lake".
const (
	// groupRows is the target number of rows of a row group (a longer
	// series gets a row group of its own).
	groupRows = 1 << 17
)

// writeDataFiles writes src's rows, in (series id, period) order, as one
// Parquet data file under the table's data directory and returns its
// location. On error nothing it wrote is left.
func writeDataFiles(ctx context.Context, fs iceio.WriteFileIO, tableLocation string, src *source) ([]string, error) {
	loc := fmt.Sprintf("%s/data/es-%s-%s.parquet", tableLocation, src.m.SnapshotID, uuid.NewString())
	f, err := fs.Create(loc)
	if err != nil {
		return nil, fmt.Errorf("lake: write data file: %w", err)
	}
	err = writeParquet(ctxWriter{ctx, f}, src)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		fs.Remove(loc)
		return nil, fmt.Errorf("lake: write data file: %w", err)
	}
	return []string{loc}, nil
}

// writeParquet writes src's rows as one Parquet file to w (pqwrite.go),
// in (series id, period) order: index rows are sorted by id bytes and
// every series' rows by period, in either tier. Row groups are cut at
// series boundaries once they reach about groupRows rows.
func writeParquet(w io.Writer, src *source) (err error) {
	defer guardFault(debug.SetPanicOnFault(true), &err)
	f, err := newPQFile(w, src.m.PeriodType)
	if err != nil {
		return err
	}
	x := src.index
	g := &pqGroup{}
	g.reset()
	tailBlock, cached := -1, (*format.Batch)(nil)
	for r := uint32(0); r < uint32(x.N); r++ {
		n := x.Length[r]
		if n == 0 {
			continue
		}
		var rows *format.Batch
		off := x.Offset[r]
		switch format.Tier(x.Tier[r]) {
		case format.Hot:
			bt, err := src.data.Batch(int(x.Batch[r]))
			if err == nil {
				err = bt.Check(off, n)
			}
			if err != nil {
				return err
			}
			rows = bt
		case format.Cold:
			if src.tail == nil {
				return fmt.Errorf("%w: series %q is cold but there is no %s", ErrBadSnapshot, x.ID(r), format.TailFile)
			}
			if int(x.Batch[r]) != tailBlock {
				bt, err := src.tail.Block(int(x.Batch[r]))
				if err != nil {
					return err
				}
				tailBlock, cached = int(x.Batch[r]), bt
			}
			if err := cached.Check(off, n); err != nil {
				return err
			}
			rows = cached
		default:
			return fmt.Errorf("%w: series %q has unknown tier %d", ErrBadSnapshot, x.ID(r), x.Tier[r])
		}
		if g.len() > 0 && g.len()+int(n) > groupRows {
			if err := f.writeGroup(g); err != nil {
				return err
			}
			g.reset()
		}
		g.add([5]string{x.ID(r), string(x.Frequency(r)), x.Unit(r), x.Name(r), x.Source(r)}, rows, off, n)
	}
	if err := f.writeGroup(g); err != nil {
		return err
	}
	return f.close()
}

// ctxWriter stops a write when ctx is done.
type ctxWriter struct {
	ctx context.Context
	w   io.Writer
}

func (c ctxWriter) Write(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.w.Write(p)
}

// dictCol is the dictionary of one string column within a row group.
type dictCol struct {
	acc   strAcc
	codes map[string]int32
	last  string
	lastC int32
}

func (d *dictCol) reset() {
	d.acc.reset(0)
	d.codes = nil
	d.lastC = -1
}

// code returns s's index in the dictionary, adding it. unique says every
// value differs from all earlier ones (series ids, sorted and distinct).
func (d *dictCol) code(s string, unique bool) int32 {
	if d.lastC >= 0 && s == d.last {
		return d.lastC
	}
	n := int32(len(d.acc.off) - 1)
	if !unique {
		if d.codes == nil {
			d.codes = map[string]int32{}
		}
		if c, ok := d.codes[s]; ok {
			d.last, d.lastC = s, c
			return c
		}
		d.codes[s] = n
	}
	d.acc.addN(s, 1)
	d.last, d.lastC = s, n
	return n
}
