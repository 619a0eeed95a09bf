package synth

import (
	"bufio"
	"io"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// parquetRowGroupRows is the number of rows per Parquet row group
// (a variable so tests can exercise many groups).
var parquetRowGroupRows = 1 << 20

var parquetCompression = compress.Codecs.Snappy

// ParquetSchema is the Arrow schema a reader gets back from WriteParquet
// output: all strings except value. period is the same ISO text as in CSV
// (dates, or date-times for hourly series).
var ParquetSchema = arrow.NewSchema([]arrow.Field{
	{Name: "series_id", Type: arrow.BinaryTypes.String},
	{Name: "period", Type: arrow.BinaryTypes.String},
	{Name: "value", Type: arrow.PrimitiveTypes.Float64},
	{Name: "unit", Type: arrow.BinaryTypes.String},
	{Name: "name", Type: arrow.BinaryTypes.String},
	{Name: "source", Type: arrow.BinaryTypes.String},
	{Name: "frequency", Type: arrow.BinaryTypes.String},
}, nil)

// Column positions of the dictionary-encoded string columns in a rowGroup.
const (
	dcID = iota
	dcPeriod
	dcUnit
	dcName
	dcSource
	dcFreq
	numDictCols
)

var dictColumn = [numDictCols]int{dcID: 0, dcPeriod: 1, dcUnit: 3, dcName: 4, dcSource: 5, dcFreq: 6}

var dictType = &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}

// writeSchema is what we hand pqarrow: the string columns as Arrow
// dictionaries, so each row group's dictionary page is written directly
// instead of hashing every value. The Arrow schema is not stored in the
// file, so readers see plain UTF-8 string columns (ParquetSchema).
var writeSchema = func() *arrow.Schema {
	fs := ParquetSchema.Fields()
	for _, c := range dictColumn {
		fs[c].Type = dictType
	}
	return arrow.NewSchema(fs, nil)
}()

// WriteParquet writes the dataset as Parquet: the same columns and rows as
// WriteCSV (value is a float64 holding the same 2-decimal number). String
// columns are dictionary encoded (one dictionary per row group and column),
// pages Snappy compressed, row groups hold 1Mi rows. Memory is bounded by
// two row groups (about 40 MiB each).
func WriteParquet(w io.Writer, o Options) (Stats, error) {
	p, err := newPlan(o)
	if err != nil {
		return Stats{}, err
	}
	props := parquet.NewWriterProperties(
		parquet.WithCompression(parquetCompression),
		parquet.WithCompressionLevel(1),
		parquet.WithDictionaryDefault(true),
		parquet.WithDictionaryFor("value", false),
		parquet.WithDictionaryPageSizeLimit(64<<20),
		parquet.WithMaxRowGroupLength(int64(parquetRowGroupRows)),
		parquet.WithDataPageSize(1<<20),
		parquet.WithStats(false),
		parquet.WithStatsFor("value", true),
		parquet.WithCreatedBy("energyscope synth"),
	)
	// pqarrow closes its sink if it is an io.Closer; the caller owns w.
	bw := bufio.NewWriterSize(struct{ io.Writer }{w}, 1<<20)
	fw, err := pqarrow.NewFileWriter(writeSchema, bw, props, pqarrow.DefaultWriterProps())
	if err != nil {
		return Stats{}, err
	}
	// A generator goroutine fills row groups while this one encodes the
	// previous group; two row group buffers alternate between them.
	full := make(chan *rowGroup)
	free := make(chan *rowGroup, 2)
	free <- newRowGroup(p, parquetRowGroupRows)
	free <- newRowGroup(p, parquetRowGroupRows)
	done := make(chan struct{})
	var st Stats
	genDone := make(chan struct{})
	go func() {
		defer close(genDone)
		defer close(full)
		rg := <-free
		s := p.newSeriesGen()
		for pos := 0; pos < p.n; pos++ {
			s.load(int(p.perm[pos]))
			rg.beginSeries(s)
			b := s.first
			for j := 0; j < s.length; j++ {
				if rg.n == rg.cap {
					select {
					case full <- rg:
					case <-done:
						return
					}
					select {
					case rg = <-free:
					case <-done:
						return
					}
					rg.beginSeries(s)
				}
				rg.addRow(s, b, s.cents())
				s.cur.next()
				b++
			}
			st.Rows += int64(s.length)
			st.Series++
		}
		if rg.n > 0 {
			select {
			case full <- rg:
			case <-done:
			}
		}
	}()

	var werr error
	for rg := range full {
		werr = rg.flush(fw)
		free <- rg
		if werr != nil {
			break
		}
	}
	close(done)
	<-genDone
	if werr != nil {
		fw.Close()
		return Stats{}, werr
	}
	if err := fw.Close(); err != nil {
		return st, err
	}
	return st, bw.Flush()
}

// strCol accumulates a string column as Arrow offsets + data.
type strCol struct {
	offsets []int32
	data    []byte
}

func (c *strCol) add(v []byte) int32 {
	c.data = append(c.data, v...)
	c.offsets = append(c.offsets, int32(len(c.data)))
	return int32(len(c.offsets) - 2)
}

func (c *strCol) array() arrow.Array {
	data := array.NewData(arrow.BinaryTypes.String, len(c.offsets)-1, []*memory.Buffer{
		nil,
		memory.NewBufferBytes(arrow.Int32Traits.CastToBytes(c.offsets)),
		memory.NewBufferBytes(c.data),
	}, nil, 0, 0)
	defer data.Release()
	return array.NewStringData(data)
}

// rowGroup builds one row group: per dictionary column, int32 indices per
// row and a duplicate-free dictionary of the values used in the group.
type rowGroup struct {
	p      *plan
	n, cap int
	idx    [numDictCols][]int32
	dict   [numDictCols]strCol
	values []float64

	// dictionary lookups, reset per row group
	meta   [numDictCols]map[string]int32 // unit, name, source, frequency
	period [numFreq][]int32              // (last bucket - bucket) -> index+1
	days   []int32                       // (End day - day) -> index+1, non-hourly
	endDay int64
	cur    [numDictCols]int32 // current series' indices
	pbuf   []byte
}

func newRowGroup(p *plan, rows int) *rowGroup {
	rg := &rowGroup{p: p, cap: rows}
	y, m, d := p.o.End.Date()
	rg.endDay = daysFromCivil(y, int(m), d)
	for _, c := range []int{dcUnit, dcName, dcSource, dcFreq} {
		rg.meta[c] = map[string]int32{}
	}
	rg.reset()
	return rg
}

// reset starts a new group, reusing the buffers: pqarrow's Write has fully
// encoded the previous group's record by the time it returns.
func (rg *rowGroup) reset() {
	rg.n = 0
	for c := range rg.idx {
		if rg.idx[c] == nil {
			rg.idx[c] = make([]int32, rg.cap)
		}
		rg.dict[c].offsets = append(rg.dict[c].offsets[:0], 0)
		rg.dict[c].data = rg.dict[c].data[:0]
		if m := rg.meta[c]; m != nil {
			clear(m)
		}
	}
	if rg.values == nil {
		rg.values = make([]float64, rg.cap)
	}
	for f := range rg.period {
		clear(rg.period[f])
	}
	clear(rg.days)
}

func (rg *rowGroup) lookup(c int, v []byte) int32 {
	if k, ok := rg.meta[c][string(v)]; ok {
		return k
	}
	k := rg.dict[c].add(v)
	rg.meta[c][string(v)] = k
	return k
}

// beginSeries registers the current series' metadata in the group's
// dictionaries. Series ids are unique, so they need no lookup.
func (rg *rowGroup) beginSeries(s *seriesGen) {
	rg.cur[dcID] = rg.dict[dcID].add(s.g.id)
	rg.cur[dcName] = rg.lookup(dcName, s.g.name)
	rg.cur[dcUnit] = rg.lookup(dcUnit, []byte(s.g.unit))
	rg.cur[dcSource] = rg.lookup(dcSource, []byte(s.g.source))
	rg.cur[dcFreq] = rg.lookup(dcFreq, []byte(freqCode[s.f]))
}

func (rg *rowGroup) addRow(s *seriesGen, b bucket, cents int64) {
	n := rg.n
	d := rg.p.last[s.f] - b
	t := grow(&rg.period[s.f], d)
	k := t[d]
	if k == 0 {
		k = rg.periodIndex(s)
		t[d] = k
	}
	rg.idx[dcPeriod][n] = k - 1
	rg.idx[dcID][n] = rg.cur[dcID]
	rg.idx[dcUnit][n] = rg.cur[dcUnit]
	rg.idx[dcName][n] = rg.cur[dcName]
	rg.idx[dcSource][n] = rg.cur[dcSource]
	rg.idx[dcFreq][n] = rg.cur[dcFreq]
	rg.values[n] = float64(cents) / 100
	rg.n++
}

// grow makes (*t)[d] addressable.
func grow(t *[]int32, d int64) []int32 {
	if d >= int64(len(*t)) {
		*t = append(*t, make([]int32, int(d)+1-len(*t)+1024)...)
	}
	return *t
}

// periodIndex returns index+1 of the cursor's period in the period
// dictionary, adding it if new. Daily, weekly, monthly and annual periods
// share date strings, so they are keyed by day to keep the dictionary free
// of duplicates; hourly strings are distinct and keyed by their bucket.
func (rg *rowGroup) periodIndex(s *seriesGen) int32 {
	if s.f == freqH {
		rg.pbuf = s.cur.appendPeriod(rg.pbuf[:0])
		return rg.dict[dcPeriod].add(rg.pbuf) + 1
	}
	d := rg.endDay - daysFromCivil(s.cur.y, s.cur.m, s.cur.d)
	t := grow(&rg.days, d)
	if t[d] == 0 {
		rg.pbuf = s.cur.appendPeriod(rg.pbuf[:0])
		t[d] = rg.dict[dcPeriod].add(rg.pbuf) + 1
	}
	return t[d]
}

func (rg *rowGroup) flush(fw *pqarrow.FileWriter) error {
	if rg.n == 0 {
		return nil
	}
	n := rg.n
	cols := make([]arrow.Array, len(Columns))
	for c, col := range dictColumn {
		idx := array.NewData(arrow.PrimitiveTypes.Int32, n, []*memory.Buffer{
			nil, memory.NewBufferBytes(arrow.Int32Traits.CastToBytes(rg.idx[c][:n])),
		}, nil, 0, 0)
		dict := rg.dict[c].array()
		data := array.NewData(dictType, n, idx.Buffers(), nil, 0, 0)
		data.SetDictionary(dict.Data())
		cols[col] = array.NewDictionaryData(data)
		data.Release()
		dict.Release()
		idx.Release()
	}
	vals := array.NewData(arrow.PrimitiveTypes.Float64, n, []*memory.Buffer{
		nil, memory.NewBufferBytes(arrow.Float64Traits.CastToBytes(rg.values[:n])),
	}, nil, 0, 0)
	cols[2] = array.NewFloat64Data(vals)
	vals.Release()
	rec := array.NewRecordBatch(writeSchema, cols, int64(n))
	for _, c := range cols {
		c.Release()
	}
	err := fw.Write(rec)
	rec.Release()
	rg.reset()
	return err
}
