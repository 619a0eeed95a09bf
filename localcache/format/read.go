package format

import (
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// The readers below are views over bytes the caller owns (a mapping). No
// slice or string they return may outlive those bytes; snapshot.Snapshot
// guarantees this with a reference count and copies out what escapes.

// openArrow opens an Arrow IPC file over b without copying, checks its
// schema against want, including the energyscope file kind and version,
// and returns its number of record batches. Everything that reads the
// footer runs under the recover: the flatbuffer accessors panic on bad
// offsets (NumRecords included).
func openArrow(name string, b []byte, want *arrow.Schema) (r *ipc.FileReader, batches int, err error) {
	defer func() {
		if p := recover(); p != nil {
			r, batches, err = nil, 0, &CorruptionError{File: name, Offset: -1, Err: fmt.Errorf("arrow reader: %w", panicError(p))}
		}
	}()
	// arrow-go's file reader reads only the footer: check the leading
	// magic too, so that a damaged file start is refused at open.
	if len(b) < 8 || string(b[:6]) != "ARROW1" {
		return nil, 0, corrupt(name, 0, "bad leading magic: not an Arrow IPC file")
	}
	if err := checkFooter(b); err != nil {
		return nil, 0, corrupt(name, -1, "%v", err)
	}
	// The mapping bounds every block (the reader checks blocks against
	// the file size); arrow-go's default 256 MiB body limit would refuse
	// the index of ~1.5M+ series.
	r, err = ipc.NewMappedFileReader(b, ipc.WithAllocator(boundedAllocator{memory.NewGoAllocator(), len(b)}), ipc.WithBodySizeLimit(int64(len(b))+1))
	if err != nil {
		return nil, 0, corrupt(name, -1, "%v", err)
	}
	got := r.Schema()
	md := got.Metadata()
	kind, _ := md.GetValue(metaFileKey)
	wantKind, _ := want.Metadata().GetValue(metaFileKey)
	if kind != wantKind {
		return nil, 0, corrupt(name, -1, "file kind %q, want %q", kind, wantKind)
	}
	if v, _ := md.GetValue(metaVersionKey); v != strconv.Itoa(fileVersion) {
		return nil, 0, corrupt(name, -1, "format version %q, want %d", v, fileVersion)
	}
	if !got.Equal(want) {
		return nil, 0, corrupt(name, -1, "schema %v, want %v", got, want)
	}
	return r, r.NumRecords(), nil
}

// boundedAllocator panics (recoverably: recordAt catches it) instead of
// allocating more than limit bytes. Our files are uncompressed and read in
// place, so the reader allocates next to nothing; but a record batch
// header that claims body compression makes arrow-go allocate the
// "uncompressed size" read from the file, and a make() of terabytes is a
// fatal error that no recover() catches.
type boundedAllocator struct {
	memory.Allocator
	limit int
}

func (a boundedAllocator) Allocate(n int) []byte {
	if n > a.limit {
		panic(fmt.Sprintf("allocation of %d bytes for a %d-byte file", n, a.limit))
	}
	return a.Allocator.Allocate(n)
}

func (a boundedAllocator) Reallocate(n int, b []byte) []byte {
	if n > a.limit {
		panic(fmt.Sprintf("allocation of %d bytes for a %d-byte file", n, a.limit))
	}
	return a.Allocator.Reallocate(n, b)
}

func recordAt(name string, r *ipc.FileReader, i int) (rec arrow.RecordBatch, err error) {
	defer func() {
		if p := recover(); p != nil {
			rec, err = nil, &CorruptionError{File: name, Offset: -1, Err: fmt.Errorf("record batch %d: %w", i, panicError(p))}
		}
	}()
	rec, err = r.RecordBatchAt(i)
	if err != nil {
		return nil, corrupt(name, -1, "record batch %d: %v", i, err)
	}
	for c, col := range rec.Columns() {
		if col.NullN() != 0 {
			rec.Release()
			return nil, corrupt(name, -1, "record batch %d column %d has nulls", i, c)
		}
	}
	return rec, nil
}

// values returns the fixed-width values of a primitive array as []T over
// the array's own buffer (no copy). The caller has checked the type.
func values[T any](a arrow.Array) []T {
	d := a.Data()
	buf := d.Buffers()[1]
	n := d.Len()
	if n == 0 || buf == nil {
		return nil
	}
	var z T
	sz := int(unsafe.Sizeof(z))
	b := buf.Bytes()
	off := d.Offset() * sz
	if off+n*sz > len(b) {
		return nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(&b[off])), n)
}

// strCol is a utf8 column read in place.
type strCol struct {
	offsets []int32
	data    []byte
}

// newStrCol reads the offsets and data buffers directly: array.String's
// ValueOffsets and ValueBytes slice without bounds checks of their own and
// panic on a corrupt file (offsets[0] > offsets[n], a short offsets
// buffer). Offsets that do not cover the column leave it empty; OpenIndex
// refuses that.
func newStrCol(a arrow.Array) strCol {
	d := a.Data()
	bufs := d.Buffers()
	var c strCol
	if len(bufs) != 3 {
		return c
	}
	if b := bufs[1]; b != nil {
		all := arrow.Int32Traits.CastFromBytes(b.Bytes())
		if lo, hi := d.Offset(), d.Offset()+d.Len()+1; lo >= 0 && hi <= len(all) {
			c.offsets = all[lo:hi]
		}
	}
	if b := bufs[2]; b != nil {
		c.data = b.Bytes()
	}
	return c
}

// at returns row i as a string over the mapped bytes, or "" if the offsets
// are out of bounds (a corrupt file must not panic a reader; Verify reports
// it).
func (c strCol) at(i uint32) string {
	if int(i)+1 >= len(c.offsets) {
		return ""
	}
	lo, hi := c.offsets[i], c.offsets[i+1]
	if lo < 0 || hi < lo || int(hi) > len(c.data) {
		return ""
	}
	if hi == lo {
		return ""
	}
	return unsafe.String(&c.data[lo], hi-lo)
}

// Index is index.arrow read in place: one row per series, in series id byte
// order. Row numbers are the series numbers of data.arrow.
type Index struct {
	rec        arrow.RecordBatch
	N          int
	PeriodType PeriodType
	ids        strCol
	Batch      []uint32
	Offset     []uint32
	Length     []uint32
	first32    []int32
	last32     []int32
	first64    []int64
	last64     []int64
	Latest     []float64
	freq       strCol
	unit       strCol
	name       strCol
	source     strCol
	Tier       []uint8
}

// OpenIndex reads index.arrow's footer, schema and single record batch
// header. Work is independent of the number of series.
func OpenIndex(b []byte, pt PeriodType, series int) (*Index, error) {
	r, nrec, err := openArrow(IndexFile, b, IndexSchema(pt))
	if err != nil {
		return nil, err
	}
	defer r.Close()
	if nrec != 1 {
		return nil, corrupt(IndexFile, -1, "%d record batches, want 1", nrec)
	}
	rec, err := recordAt(IndexFile, r, 0)
	if err != nil {
		return nil, err
	}
	if int(rec.NumRows()) != series {
		rec.Release()
		return nil, corrupt(IndexFile, -1, "%d rows, manifest says %d series", rec.NumRows(), series)
	}
	x := &Index{rec: rec, N: series, PeriodType: pt}
	x.ids = newStrCol(rec.Column(IdxSeriesID))
	x.Batch = values[uint32](rec.Column(IdxBatch))
	x.Offset = values[uint32](rec.Column(IdxOffset))
	x.Length = values[uint32](rec.Column(IdxLength))
	if pt == PeriodTimestamp {
		x.first64 = values[int64](rec.Column(IdxFirst))
		x.last64 = values[int64](rec.Column(IdxLast))
	} else {
		x.first32 = values[int32](rec.Column(IdxFirst))
		x.last32 = values[int32](rec.Column(IdxLast))
	}
	x.Latest = values[float64](rec.Column(IdxLatest))
	x.freq = newStrCol(rec.Column(IdxFrequency))
	x.unit = newStrCol(rec.Column(IdxUnit))
	x.name = newStrCol(rec.Column(IdxName))
	x.source = newStrCol(rec.Column(IdxSource))
	x.Tier = values[uint8](rec.Column(IdxTier))
	firsts, lasts := len(x.first32), len(x.last32)
	if pt == PeriodTimestamp {
		firsts, lasts = len(x.first64), len(x.last64)
	}
	for _, n := range []int{len(x.Batch), len(x.Offset), len(x.Length), firsts, lasts, len(x.Latest), len(x.Tier),
		len(x.ids.offsets) - 1, len(x.freq.offsets) - 1, len(x.unit.offsets) - 1, len(x.name.offsets) - 1, len(x.source.offsets) - 1} {
		if n != series && series > 0 {
			x.Close()
			return nil, corrupt(IndexFile, -1, "column shorter than %d rows", series)
		}
	}
	return x, nil
}

// Close releases the record batch (not the bytes).
func (x *Index) Close() {
	if x.rec != nil {
		x.rec.Release()
		x.rec = nil
	}
}

// ID returns the series id of row i. The string aliases the mapping.
func (x *Index) ID(i uint32) string { return x.ids.at(i) }

// Name, Unit, Source and Frequency alias the mapping like ID.
func (x *Index) Name(i uint32) string   { return x.name.at(i) }
func (x *Index) Unit(i uint32) string   { return x.unit.at(i) }
func (x *Index) Source(i uint32) string { return x.source.at(i) }
func (x *Index) Frequency(i uint32) Frequency {
	return Frequency(x.freq.at(i))
}

// First and Last return the first and last period of row i in unix seconds.
func (x *Index) First(i uint32) int64 {
	if x.first64 != nil {
		return x.first64[i]
	}
	return int64(x.first32[i]) * 86400
}

func (x *Index) Last(i uint32) int64 {
	if x.last64 != nil {
		return x.last64[i]
	}
	return int64(x.last32[i]) * 86400
}

// Batch is one record batch of data.arrow as typed slices over the mapping.
// Exactly one of Days and Secs is set, by the snapshot's period type.
type Batch struct {
	Series []uint32
	Days   []int32
	Secs   []int64
	Values []float64
}

// Data is data.arrow read lazily: a batch's header is decoded the first
// time a lookup touches it, so open costs the footer only.
type Data struct {
	r          *ipc.FileReader
	pt         PeriodType
	mu         sync.Mutex // serializes decoding; guards recs
	batches    []atomic.Pointer[Batch]
	recs       []arrow.RecordBatch
	NumBatches int
}

// OpenData reads data.arrow's footer and schema.
func OpenData(b []byte, pt PeriodType, batches int) (*Data, error) {
	r, n, err := openArrow(DataFile, b, DataSchema(pt))
	if err != nil {
		return nil, err
	}
	if n != batches {
		r.Close() // clears the footer: NumRecords would panic after this
		return nil, corrupt(DataFile, -1, "%d record batches, manifest says %d", n, batches)
	}
	return &Data{r: r, pt: pt, batches: make([]atomic.Pointer[Batch], batches), recs: make([]arrow.RecordBatch, batches), NumBatches: batches}, nil
}

// Batch returns batch i, decoding its header on first use.
func (d *Data) Batch(i int) (*Batch, error) {
	if i < 0 || i >= d.NumBatches {
		return nil, corrupt(DataFile, -1, "batch %d out of range (%d batches)", i, d.NumBatches)
	}
	if b := d.batches[i].Load(); b != nil {
		return b, nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if b := d.batches[i].Load(); b != nil {
		return b, nil
	}
	rec, err := recordAt(DataFile, d.r, i)
	if err != nil {
		return nil, err
	}
	b := &Batch{Series: values[uint32](rec.Column(DataSeries)), Values: values[float64](rec.Column(DataValue))}
	n := int(rec.NumRows())
	pn := 0
	if d.pt == PeriodTimestamp {
		b.Secs = values[int64](rec.Column(DataPeriod))
		pn = len(b.Secs)
	} else {
		b.Days = values[int32](rec.Column(DataPeriod))
		pn = len(b.Days)
	}
	if len(b.Series) != n || pn != n || len(b.Values) != n {
		rec.Release()
		return nil, corrupt(DataFile, -1, "batch %d: column lengths disagree with %d rows", i, n)
	}
	d.recs[i] = rec
	d.batches[i].Store(b)
	return b, nil
}

// Close releases decoded batch headers (not the bytes).
func (d *Data) Close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for i, r := range d.recs {
		if r != nil {
			r.Release()
			d.recs[i] = nil
		}
	}
	d.r.Close()
}

// BatchRows is a convenience for callers that check a slice before use.
func (b *Batch) Len() int { return len(b.Values) }

// Check returns an error if [off, off+n) is not inside the batch.
func (b *Batch) Check(off, n uint32) error {
	if uint64(off)+uint64(n) > uint64(len(b.Values)) {
		return corrupt(DataFile, -1, "series rows [%d,%d) outside batch of %d", off, uint64(off)+uint64(n), len(b.Values))
	}
	return nil
}

// String for debugging.
func (p PeriodType) String() string { return string(p) }

// panicError is a recovered panic value as an error, the original one when
// it is an error (a memory fault under debug.SetPanicOnFault stays
// recognisable to errors.As).
func panicError(p any) error {
	if err, ok := p.(error); ok {
		return err
	}
	return fmt.Errorf("%v", p)
}
