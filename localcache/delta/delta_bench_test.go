package delta

import (
	"fmt"
	"testing"

	"github.com/energyscope/energyscope/localcache/format"
)

// mapBase is a fake snapshot with O(1) lookups, for benchmarks.
type mapBase map[string]uint32

func (b mapBase) Row(id string) (uint32, bool)          { r, ok := b[id]; return r, ok }
func (b mapBase) Frequency(row uint32) format.Frequency { return format.Daily }
func (b mapBase) NumSeries() int                        { return len(b) }

// BenchmarkDeltaApplyCPU is the CPU side of Store.Apply without the
// fsync: validate, encode the WAL frame, insert into the delta. Batches of
// 1,000 rows over 20,000 series, as in localcache's BenchmarkLiveApply;
// the per-row budget there is about 0.85 µs including the fsync.
func BenchmarkDeltaApplyCPU(b *testing.B) {
	const nSeries = 20_000
	base := mapBase{}
	ids := make([]string, nSeries)
	for i := range ids {
		ids[i] = fmt.Sprintf("BENCH.S%05d.D", i)
		base[ids[i]] = uint32(i)
	}
	day0 := liveDay("2026-01-01")
	d := New(base, 0)
	batch := make([]format.Record, 1000)
	var buf []byte
	seq := uint64(0)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for k := range batch {
			seq++
			j := int(seq)
			batch[k] = format.Record{Seq: seq, Op: format.Upsert, SeriesID: ids[j%nSeries], Period: day0 + int64(j%105)*86400, Value: float64(j)}
		}
		if err := format.ValidateRecords(batch); err != nil {
			b.Fatal(err)
		}
		buf = format.EncodeBatch(buf[:0], batch)
		d.Apply(batch)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(batch)), "ns/row")
}
