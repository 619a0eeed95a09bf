package format

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"time"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/energyscope/energyscope/internal/fileutil"
	"github.com/energyscope/energyscope/localcache/format/internal/tailhook"
)

// WriteOptions controls Write. The zero value is usable except for Dataset.
type WriteOptions struct {
	Dataset          string
	Epoch            uint64
	CoversThroughSeq uint64
	// BatchRows is the target record batch size of data.arrow; batches are
	// cut only at series boundaries, so a longer series gets a batch of its
	// own. Default 1<<20.
	BatchRows int
	// Created is recorded in the manifest (the only wall-clock field).
	// Zero means time.Now().
	Created time.Time
	// Progress, if set, is called with the stage name and rows done/total.
	Progress func(stage string, done, total int64)
	// Tail, if set, decides which series go to the cold tier
	// (tail.parquet); nil keeps each series' SeriesMeta.Tier, which is
	// what compaction relies on to keep tiers stable.
	Tail *TailRule
	// Version is the format version to write: 0 means FormatVersion;
	// MinFormatVersion writes a snapshot that builds of that version read
	// (and that is byte for byte what they cook from the same rows).
	Version int
}

// WriteStats reports what Write did with the rows it was given.
type WriteStats struct {
	InputRows  int64
	Rows       int64
	Series     int
	Duplicates int64 // rows that lost to a later row with the same (series, normalized period)
}

// Write cooks t into a new snapshot directory dir, which must not exist.
// The result depends only on the rows, the tiers and on Dataset, Epoch and
// CoversThroughSeq: the same input gives byte-identical data.arrow,
// index.arrow, index.hash and tail.parquet. Rows of cold series go to
// tail.parquet (written only when some series is cold) instead of
// data.arrow. Files and directory are fsynced before Write returns; dir is
// removed again if Write fails.
func Write(dir string, t *Table, o WriteOptions) (m *Manifest, st WriteStats, err error) {
	if err := ValidDatasetName(o.Dataset); err != nil {
		return nil, st, err
	}
	if err := t.validate(); err != nil {
		return nil, st, err
	}
	if err := startWrite(dir, &o); err != nil {
		return nil, st, err
	}
	defer func() {
		if err != nil {
			os.RemoveAll(dir)
		}
	}()

	c := cookRows(t, o.Progress)
	return writeCooked(dirSink(dir), c, t, int64(t.Len()), o)
}

// writeCooked writes the files of a snapshot from rows already cooked
// into s; t supplies the series table (c.order indexes t.Series; its rows
// are not read). The caller removes what s holds on error.
func writeCooked(s sink, c *cooked, t *Table, inputRows int64, o WriteOptions) (m *Manifest, st WriteStats, err error) {
	switch o.Version {
	case 0:
		o.Version = FormatVersion
	case MinFormatVersion, 2, 3, 4, FormatVersion:
	default:
		return nil, st, fmt.Errorf("write: format version %d is not %d..%d", o.Version, MinFormatVersion, FormatVersion)
	}
	st = WriteStats{InputRows: inputRows, Rows: int64(len(c.value)), Series: len(c.order), Duplicates: c.duplicates}

	ids := make([]string, len(c.order))
	for r, si := range c.order {
		ids[r] = t.Series[si].ID
	}
	tier, nCold := c.tiers(t, ids, o.Tail)
	var cold *cooked
	if nCold > 0 {
		if tailhook.Write == nil {
			return nil, st, ErrNoTailWriter
		}
		cold = c.split(tier)
		cold.batches = cold.cutBatches(TailBlockRows)
	}

	m = &Manifest{
		Format:           FormatName,
		Version:          o.Version,
		Dataset:          o.Dataset,
		Epoch:            o.Epoch,
		CoversThroughSeq: o.CoversThroughSeq,
		Rows:             st.Rows,
		Series:           st.Series,
		HotSeries:        st.Series - nCold,
		PeriodType:       c.periodType,
		Duplicates:       c.duplicates,
		Created:          o.Created.UTC().Truncate(time.Second),
	}
	c.batches = c.cutBatches(o.BatchRows)
	m.Batches = len(c.batches)

	dataInfo, err := writeArrow(s, DataFile, DataSchema(c.periodType), func(w *ipc.FileWriter) error {
		return c.writeData(w)
	})
	if err != nil {
		return nil, st, fmt.Errorf("write %s: %w", DataFile, err)
	}
	idxInfo, err := writeArrow(s, IndexFile, IndexSchema(c.periodType), func(w *ipc.FileWriter) error {
		return c.writeIndex(w, t, ids, cold, tier)
	})
	if err != nil {
		return nil, st, fmt.Errorf("write %s: %w", IndexFile, err)
	}
	var hb []byte
	if m.Version == 1 {
		hb = buildHash(ids)
	} else if hb, err = buildHashIn(s, m.Version, c.periodType, len(ids), m.Batches); err != nil {
		return nil, st, fmt.Errorf("write %s: %w", HashFile, err)
	}
	if err := s.writeBytes(HashFile, hb); err != nil {
		return nil, st, fmt.Errorf("write %s: %w", HashFile, err)
	}
	hh := newChunkHasher()
	hh.Write(hb)
	hashInfo := hh.info(HashFile)

	m.Files = []FileInfo{dataInfo, idxInfo, hashInfo}
	if cold != nil {
		tailInfo, err := writeTailFile(s, cold)
		if err != nil {
			return nil, st, fmt.Errorf("write %s: %w", TailFile, err)
		}
		m.Files = append(m.Files, tailInfo)
	}
	m.SnapshotID = snapshotID(m)
	mb, err := manifestBytes(m)
	if err == nil {
		err = s.writeBytes(ManifestFile, mb)
	}
	if err != nil {
		return nil, st, fmt.Errorf("write %s: %w", ManifestFile, err)
	}
	if err := s.finish(); err != nil {
		return nil, st, err
	}
	return m, st, nil
}

// snapshotID is content-addressed: e<epoch>-s<covers_through_seq>-<12 hex of
// the SHA-256 over the files' hashes>.
func snapshotID(m *Manifest) string {
	h := sha256.New()
	for _, f := range m.Files {
		h.Write([]byte(f.Name + ":" + f.SHA256 + "\n"))
	}
	return fmt.Sprintf("e%d-s%d-%s", m.Epoch, m.CoversThroughSeq, hex.EncodeToString(h.Sum(nil))[:12])
}

// The period limits, the one set of them: a period's day number must fit
// the int32 of date32 (about ±5.8 million years), or the period column would
// wrap around silently.
const (
	// MinPeriod and MaxPeriod bound the periods Write accepts. Write
	// normalizes before it stores, which moves a period down by at most a
	// year (a bucket starts at most 366 days before any time in it), hence
	// the margin at the low end.
	MinPeriod = (math.MinInt32 + 366) * 86400
	MaxPeriod = math.MaxInt32 * 86400

	// MinRecordPeriod is the lowest period a live record may carry. The
	// store normalizes a record before compaction hands it to Write, so the
	// record's period needs a year more margin than Write's: any period in
	// [MinRecordPeriod, MaxPeriod] can always be compacted.
	MinRecordPeriod = MinPeriod + 366*86400
)

func (t *Table) validate() error {
	n := len(t.Period)
	if len(t.SeriesIdx) != n || len(t.Value) != n {
		return fmt.Errorf("table columns disagree: %d series, %d periods, %d values", len(t.SeriesIdx), n, len(t.Value))
	}
	if len(t.Series) > math.MaxUint32-1 {
		return errors.New("too many series")
	}
	seen := make(map[string]struct{}, len(t.Series))
	for i := range t.Series {
		s := &t.Series[i]
		if s.ID == "" {
			return fmt.Errorf("series %d has an empty id", i)
		}
		if _, dup := seen[s.ID]; dup {
			return fmt.Errorf("series id %q appears twice in the series table", s.ID)
		}
		seen[s.ID] = struct{}{}
		if s.Frequency != "" {
			if _, err := ParseFrequency(string(s.Frequency)); err != nil {
				return fmt.Errorf("series %q: %w", s.ID, err)
			}
		}
	}
	ns := uint32(len(t.Series))
	for i, si := range t.SeriesIdx {
		if si >= ns {
			return fmt.Errorf("row %d: series index %d out of range", i, si)
		}
		if p := t.Period[i]; p < MinPeriod || p > MaxPeriod {
			return fmt.Errorf("row %d (series %q): period %d is outside the supported range", i, t.Series[si].ID, p)
		}
		if v := t.Value[i]; math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("row %d (series %q): value %v is not a finite number", i, t.Series[si].ID, v)
		}
	}
	return nil
}

// cooked holds the rows sorted by (rank of series id, normalized period),
// deduplicated, plus per-series bounds. rank r is the r-th series in id
// byte order; it is the series' row in index.arrow.
type cooked struct {
	order      []uint32 // rank -> index into Table.Series
	freq       []Frequency
	start      []int64 // rank -> first output row; start[len(order)] = rows
	series     []uint32
	days       []int32 // period column when periodType is date32
	secs       []int64 // period column when periodType is timestamp
	value      []float64
	periodType PeriodType
	duplicates int64
	batches    []batchSpan
}

func cookRows(t *Table, progress func(string, int64, int64)) *cooked {
	ns := len(t.Series)
	n := t.Len()
	c := &cooked{order: make([]uint32, ns), freq: make([]Frequency, ns)}

	// Rank the ids once; rows are never compared by string.
	for i := range c.order {
		c.order[i] = uint32(i)
	}
	sort.Slice(c.order, func(a, b int) bool { return t.Series[c.order[a]].ID < t.Series[c.order[b]].ID })
	rank := make([]uint32, ns)
	for r, si := range c.order {
		rank[si] = uint32(r)
	}

	// Stable counting sort of row numbers by rank: equal (series, period)
	// rows keep their input order, which is what "last one wins" needs.
	pos := make([]int64, ns+1)
	for _, si := range t.SeriesIdx {
		pos[rank[si]+1]++
	}
	for r := 1; r <= ns; r++ {
		pos[r] += pos[r-1]
	}
	inStart := slices.Clone(pos)
	perm := make([]uint32, n)
	for i, si := range t.SeriesIdx {
		r := rank[si]
		perm[pos[r]] = uint32(i)
		pos[r]++
	}
	if progress != nil {
		progress("sort", int64(n), int64(n))
	}

	// Per series: sort by raw period (usually already sorted), infer the
	// frequency if none was given, normalize and keep the last row of each
	// normalized period. Normalization is monotone, so sorted raw periods
	// stay sorted once normalized and duplicates are adjacent.
	intraday := false
	for r := 0; r < ns; r++ {
		seg := perm[inStart[r]:inStart[r+1]]
		sortSegment(seg, t.Period)
		f := t.Series[c.order[r]].Frequency
		if f == "" {
			f = inferFrequency(seg, t.Period)
		} else {
			// Canonical code ("daily" -> D): validate accepted the
			// spelling; normalization and the index need the code.
			f, _ = ParseFrequency(string(f))
		}
		c.freq[r] = f
		if f.Intraday() {
			intraday = true
		}
	}
	c.periodType = PeriodDate32
	if intraday {
		c.periodType = PeriodTimestamp
	}
	c.start = make([]int64, ns+1)
	c.series = make([]uint32, 0, n)
	c.value = make([]float64, 0, n)
	if intraday {
		c.secs = make([]int64, 0, n)
	} else {
		c.days = make([]int32, 0, n)
	}
	for r := 0; r < ns; r++ {
		c.start[r] = int64(len(c.value))
		f := c.freq[r]
		seg := perm[inStart[r]:inStart[r+1]]
		havePrev := false
		var prev int64
		var winner uint32
		for _, i := range seg {
			p := f.Normalize(t.Period[i])
			if havePrev && p == prev {
				c.duplicates++
				if i > winner {
					winner = i
					c.value[len(c.value)-1] = t.Value[i]
				}
				continue
			}
			havePrev, prev, winner = true, p, i
			c.series = append(c.series, uint32(r))
			if intraday {
				c.secs = append(c.secs, p)
			} else {
				c.days = append(c.days, int32(p/86400))
			}
			c.value = append(c.value, t.Value[i])
		}
		if progress != nil && r%4096 == 0 {
			progress("normalize", inStart[r+1], int64(n))
		}
	}
	c.start[ns] = int64(len(c.value))
	return c
}

func sortSegment(seg []uint32, period []int64) {
	for k := 1; k < len(seg); k++ {
		if period[seg[k]] < period[seg[k-1]] {
			slices.SortStableFunc(seg, func(a, b uint32) int {
				pa, pb := period[a], period[b]
				switch {
				case pa < pb:
					return -1
				case pa > pb:
					return 1
				}
				return 0
			})
			return
		}
	}
}

// InferFrequency is the frequency Write gives a series that has none, from
// its periods (unix seconds, in any order): the median spacing of the first
// distinct periods. Live ingest uses it for a series a delta creates, so
// that the delta and a cook of the same rows agree.
func InferFrequency(periods []int64) Frequency {
	p := slices.Clone(periods)
	slices.Sort(p)
	seg := make([]uint32, len(p))
	for i := range seg {
		seg[i] = uint32(i)
	}
	return inferFrequency(seg, p)
}

// inferFrequency picks the frequency from the median spacing of the first
// distinct periods of a series.
func inferFrequency(seg []uint32, period []int64) Frequency {
	var diffs []int64
	for k := 1; k < len(seg) && len(diffs) < 255; k++ {
		if d := period[seg[k]] - period[seg[k-1]]; d > 0 {
			diffs = append(diffs, d)
		}
	}
	if len(diffs) == 0 {
		if len(seg) > 0 && period[seg[0]]%86400 != 0 {
			return Hourly
		}
		return Daily
	}
	slices.Sort(diffs)
	med := diffs[len(diffs)/2]
	const day = 86400
	switch {
	case med < day*3/4:
		return Hourly
	case med < 4*day:
		return Daily
	case med < 15*day:
		return Weekly
	case med < 60*day:
		return Monthly
	case med < 200*day:
		return Quarterly
	}
	return Annual
}

// batchSpan is a run of whole series [r0, r1) that forms one record batch.
type batchSpan struct{ r0, r1 int }

func (c *cooked) cutBatches(target int) []batchSpan {
	var out []batchSpan
	r0 := 0
	for r := 0; r < len(c.order); r++ {
		rows := c.start[r+1] - c.start[r0]
		if r > r0 && rows > int64(target) {
			out = append(out, batchSpan{r0, r})
			r0 = r
		}
	}
	if r0 < len(c.order) && c.start[len(c.order)] > c.start[r0] {
		out = append(out, batchSpan{r0, len(c.order)})
	} else if r0 < len(c.order) && len(out) > 0 {
		// Trailing series without rows join the last batch.
		out[len(out)-1].r1 = len(c.order)
	}
	return out
}

func bytesOf[T any](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	var z T
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*int(unsafe.Sizeof(z)))
}

func primitive(dt arrow.DataType, n int, b []byte) arrow.Array {
	d := array.NewData(dt, n, []*memory.Buffer{nil, memory.NewBufferBytes(b)}, nil, 0, 0)
	defer d.Release()
	return array.MakeFromData(d)
}

func (c *cooked) writeData(w *ipc.FileWriter) error {
	schema := DataSchema(c.periodType)
	for _, b := range c.batches {
		lo, hi := c.start[b.r0], c.start[b.r1]
		n := int(hi - lo)
		var pcol arrow.Array
		if c.periodType == PeriodTimestamp {
			pcol = primitive(schema.Field(DataPeriod).Type, n, bytesOf(c.secs[lo:hi]))
		} else {
			pcol = primitive(schema.Field(DataPeriod).Type, n, bytesOf(c.days[lo:hi]))
		}
		cols := []arrow.Array{
			primitive(arrow.PrimitiveTypes.Uint32, n, bytesOf(c.series[lo:hi])),
			pcol,
			primitive(arrow.PrimitiveTypes.Float64, n, bytesOf(c.value[lo:hi])),
		}
		rec := array.NewRecordBatch(schema, cols, int64(n))
		err := w.Write(rec)
		rec.Release()
		for _, a := range cols {
			a.Release()
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// writeIndex writes index.arrow. c holds the hot rows; cold, if not nil,
// the rows of the series whose tier is Cold (see split).
func (c *cooked) writeIndex(w *ipc.FileWriter, t *Table, ids []string, cold *cooked, tier []Tier) error {
	ns := len(c.order)
	mem := memory.NewGoAllocator()
	schema := IndexSchema(c.periodType)
	bld := array.NewRecordBuilder(mem, schema)
	defer bld.Release()
	bld.Reserve(ns)

	batch := make([]uint32, ns)
	offset := make([]uint32, ns)
	length := make([]uint32, ns)
	first := make([]int64, ns)
	last := make([]int64, ns)
	latest := make([]float64, ns)
	// of returns the rows holding rank r: the cold tier's or the hot one's.
	of := func(r int) *cooked {
		if tier[r] == Cold {
			return cold
		}
		return c
	}
	for _, sub := range []*cooked{c, cold} {
		if sub == nil {
			continue
		}
		for bi, b := range sub.batches {
			for r := b.r0; r < b.r1; r++ {
				if of(r) != sub {
					continue
				}
				batch[r] = uint32(bi)
				offset[r] = uint32(sub.start[r] - sub.start[b.r0])
				length[r] = uint32(sub.start[r+1] - sub.start[r])
			}
		}
	}
	for r := 0; r < ns; r++ {
		sub := of(r)
		lo, hi := sub.start[r], sub.start[r+1]
		if hi > lo {
			first[r], last[r] = sub.periodAt(lo), sub.periodAt(hi-1)
			latest[r] = sub.value[hi-1]
		} else {
			latest[r] = math.NaN()
		}
	}
	sb := func(i int) *array.StringBuilder { return bld.Field(i).(*array.StringBuilder) }
	sb(IdxSeriesID).AppendValues(ids, nil)
	bld.Field(IdxBatch).(*array.Uint32Builder).AppendValues(batch, nil)
	bld.Field(IdxOffset).(*array.Uint32Builder).AppendValues(offset, nil)
	bld.Field(IdxLength).(*array.Uint32Builder).AppendValues(length, nil)
	for _, col := range []struct {
		i int
		v []int64
	}{{IdxFirst, first}, {IdxLast, last}} {
		switch fb := bld.Field(col.i).(type) {
		case *array.Date32Builder:
			for _, p := range col.v {
				fb.Append(arrow.Date32(p / 86400))
			}
		case *array.TimestampBuilder:
			for _, p := range col.v {
				fb.Append(arrow.Timestamp(p))
			}
		}
	}
	bld.Field(IdxLatest).(*array.Float64Builder).AppendValues(latest, nil)
	tiers := make([]uint8, ns)
	for r, si := range c.order {
		m := &t.Series[si]
		sb(IdxFrequency).Append(string(c.freq[r]))
		sb(IdxUnit).Append(m.Unit)
		sb(IdxName).Append(m.Name)
		sb(IdxSource).Append(m.Source)
		tiers[r] = uint8(tier[r])
	}
	bld.Field(IdxTier).(*array.Uint8Builder).AppendValues(tiers, nil)
	rec := bld.NewRecordBatch()
	defer rec.Release()
	return w.Write(rec)
}

func (c *cooked) periodAt(row int64) int64 {
	if c.periodType == PeriodTimestamp {
		return c.secs[row]
	}
	return int64(c.days[row]) * 86400
}

func writeArrow(s sink, name string, schema *arrow.Schema, body func(*ipc.FileWriter) error) (FileInfo, error) {
	return s.writeFile(name, func(bw io.Writer) error {
		w, err := ipc.NewFileWriter(bw, ipc.WithSchema(schema), ipc.WithAllocator(memory.NewGoAllocator()))
		if err != nil {
			return err
		}
		if err := body(w); err != nil {
			w.Close()
			return err
		}
		return w.Close()
	})
}

// writeHashed creates path (it must not exist), has body write the file
// through a 1 MiB buffer, then flushes, syncs and closes it, and returns
// its FileInfo with the chunk hashes of the bytes written.
func writeHashed(path string, body func(io.Writer) error) (FileInfo, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return FileInfo{}, err
	}
	defer f.Close()
	h := newChunkHasher()
	bw := bufio1M(hashingWriter{w: f, h: h})
	if err := body(bw); err != nil {
		return FileInfo{}, err
	}
	if err := bw.Flush(); err != nil {
		return FileInfo{}, err
	}
	if err := fileutil.SyncClose(f); err != nil {
		return FileInfo{}, err
	}
	return h.info(filepath.Base(path)), nil
}

// hashingWriter writes to w and hashes what it wrote.
type hashingWriter struct {
	w io.Writer
	h *chunkHasher
}

// parallelMin is the size from which hashingWriter writes and hashes a
// buffer on separate goroutines: a snapshot's bulk goes through in 1 MiB
// pieces, and the file write, the whole-file SHA-256 and the chunk
// SHA-256 each take about as long as the others.
const parallelMin = 256 << 10

func (m hashingWriter) Write(p []byte) (int, error) {
	if len(p) < parallelMin {
		n, err := m.w.Write(p)
		m.h.Write(p[:n])
		return n, err
	}
	// p is only read, by all three, and all are done before Write returns
	// (io.Writer must not retain p).
	var n int
	var err error
	done := make(chan struct{})
	go func() {
		n, err = m.w.Write(p)
		close(done)
	}()
	m.h.Write(p) // if the write fails, the caller discards file and hash
	<-done
	return n, err
}

// startWrite fills in o's defaults and creates dir, which must not exist.
func startWrite(dir string, o *WriteOptions) error {
	defaults(o)
	return os.Mkdir(dir, 0o755)
}

// defaults fills in o's defaults.
func defaults(o *WriteOptions) {
	if o.BatchRows <= 0 {
		o.BatchRows = 1 << 20
	}
	if o.Created.IsZero() {
		o.Created = time.Now()
	}
}

// buildHashIn builds index.hash version 2 or 3 for the index.arrow and
// data.arrow already written into s.
func buildHashIn(s sink, version int, pt PeriodType, series, batches int) ([]byte, error) {
	xf, err := s.mapFile(IndexFile)
	if err != nil {
		return nil, err
	}
	defer xf.Close()
	df, err := s.mapFile(DataFile)
	if err != nil {
		return nil, err
	}
	defer df.Close()
	return buildHashFromBytes(version, xf.Bytes, df.Bytes, pt, series, batches)
}
