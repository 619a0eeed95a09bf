package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/localcache/snapshot"
)

// The resident path is what a time-series server does today at start or
// reload: read the whole data file into its own memory (arrow-go's copying
// ipc.NewFileReader) and rebuild a Go map from series id to row range.

type rowRange struct{ batch, off, n uint32 }

type resident struct {
	recs []arrow.RecordBatch
	days [][]int32 // per batch, date32 snapshots
	secs [][]int64 // per batch, timestamp snapshots
	vals [][]float64
	idx  map[string]rowRange
}

func loadResident(snapDir string) (*resident, error) {
	res := &resident{}
	mem := memory.NewGoAllocator()
	df, err := os.Open(filepath.Join(snapDir, format.DataFile))
	if err != nil {
		return nil, err
	}
	defer df.Close()
	// The body limit is raised to the file's size: arrow-go refuses blocks
	// over 256 MiB by default, and a full-scale index.arrow is one 489 MB
	// record batch.
	dr, err := ipc.NewFileReader(df, ipc.WithAllocator(mem), ipc.WithBodySizeLimit(fileLimit(df)))
	if err != nil {
		return nil, err
	}
	defer dr.Close()
	for i := 0; i < dr.NumRecords(); i++ {
		rec, err := dr.RecordBatchAt(i)
		if err != nil {
			return nil, err
		}
		res.recs = append(res.recs, rec)
		switch p := rec.Column(format.DataPeriod).(type) {
		case *array.Date32:
			res.days = append(res.days, castSlice[int32](p.Date32Values()))
		case *array.Timestamp:
			res.secs = append(res.secs, castSlice[int64](p.TimestampValues()))
		default:
			return nil, fmt.Errorf("resident: unexpected period column %T", p)
		}
		res.vals = append(res.vals, rec.Column(format.DataValue).(*array.Float64).Float64Values())
	}

	xf, err := os.Open(filepath.Join(snapDir, format.IndexFile))
	if err != nil {
		return nil, err
	}
	defer xf.Close()
	xr, err := ipc.NewFileReader(xf, ipc.WithAllocator(mem), ipc.WithBodySizeLimit(fileLimit(xf)))
	if err != nil {
		return nil, err
	}
	defer xr.Close()
	for i := 0; i < xr.NumRecords(); i++ {
		rec, err := xr.RecordBatchAt(i)
		if err != nil {
			return nil, err
		}
		ids := rec.Column(format.IdxSeriesID).(*array.String)
		b := rec.Column(format.IdxBatch).(*array.Uint32)
		o := rec.Column(format.IdxOffset).(*array.Uint32)
		n := rec.Column(format.IdxLength).(*array.Uint32)
		if res.idx == nil {
			res.idx = make(map[string]rowRange, ids.Len())
		}
		for r := 0; r < ids.Len(); r++ {
			res.idx[strings.Clone(ids.Value(r))] = rowRange{b.Value(r), o.Value(r), n.Value(r)}
		}
		rec.Release()
	}
	return res, nil
}

func (res *resident) release() {
	for _, r := range res.recs {
		r.Release()
	}
}

// get returns the sum of q's values and periods and their count: map
// lookup, the same binary search as the mapped path, then every value and
// every period of the range read, as the store's loops read them (timeGets,
// cgStore: sumValues + sumPeriods). Until 2026-12-01 only the values were
// read here, so the store side did ~220 instructions a query more work
// than its peer (BENCHMARKS.md "Serving snapshot v2").
func (res *resident) get(q *query) (sum float64, n int) {
	rr, ok := res.idx[q.ID]
	if !ok || rr.n == 0 {
		return 0, 0
	}
	vals := res.vals[rr.batch][rr.off : rr.off+rr.n]
	var lo, hi int
	var pts snapshot.Points
	if res.secs != nil {
		p := res.secs[rr.batch][rr.off : rr.off+rr.n]
		lo, hi = searchGE(p, q.From), searchGE(p, q.To+1)
		pts.Secs = p[lo:hi]
	} else {
		p := res.days[rr.batch][rr.off : rr.off+rr.n]
		lo, hi = searchGE32(p, ceilDiv(q.From, 86400)), searchGE32(p, floorDiv(q.To, 86400)+1)
		pts.Days = p[lo:hi]
	}
	return sumValues(vals[lo:hi]) + sumPeriods(pts), hi - lo
}

func searchGE(p []int64, x int64) int {
	lo, hi := 0, len(p)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if p[m] < x {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

func searchGE32(p []int32, x int64) int {
	lo, hi := 0, len(p)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if int64(p[m]) < x {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

func ceilDiv(a, b int64) int64 { return -floorDiv(-a, b) }

// sumValues reads every value (four accumulators, so the add latency chain
// does not dominate long ranges).
func sumValues(v []float64) float64 {
	var s0, s1, s2, s3 float64
	i := 0
	for ; i+4 <= len(v); i += 4 {
		s0 += v[i]
		s1 += v[i+1]
		s2 += v[i+2]
		s3 += v[i+3]
	}
	for ; i < len(v); i++ {
		s0 += v[i]
	}
	return s0 + s1 + s2 + s3
}

// castSlice reinterprets a slice of a named integer type (arrow.Date32,
// arrow.Timestamp) as its underlying type.
func castSlice[T, S any](s []S) []T {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(s))), len(s))
}

func fileLimit(f *os.File) int64 {
	if st, err := f.Stat(); err == nil && st.Size() > 0 {
		return st.Size()
	}
	return 0 // no limit
}

// readEvery reads every series once, whole (values and periods): the
// resident path's peer of the store's readEvery.
func (res *resident) readEvery() float64 {
	var sum float64
	for _, rr := range res.idx {
		vals := res.vals[rr.batch][rr.off : rr.off+rr.n]
		var pts snapshot.Points
		if res.secs != nil {
			pts.Secs = res.secs[rr.batch][rr.off : rr.off+rr.n]
		} else {
			pts.Days = res.days[rr.batch][rr.off : rr.off+rr.n]
		}
		sum += sumValues(vals) + sumPeriods(pts)
	}
	return sum
}
