package format

import (
	"encoding/binary"
	"errors"
	"math"
	"strings"
	"testing"
)

func TestValidateRecords(t *testing.T) {
	up := func(seq uint64) Record {
		return Record{Seq: seq, Op: Upsert, SeriesID: "A", Period: 86400, Value: 1}
	}
	with := func(r Record, f func(*Record)) Record { f(&r); return r }
	long := strings.Repeat("x", MaxRecordMetaLen+1)
	tests := []struct {
		name  string
		batch []Record
		ok    bool
	}{
		{"empty batch", nil, true},
		{"one upsert", []Record{up(1)}, true},
		{"gaps between seqs", []Record{up(1), up(5), up(100)}, true},
		{"delete ignores its NaN value", []Record{with(up(1), func(r *Record) { r.Op, r.Value = Delete, math.NaN() })}, true},
		{"meta with every frequency spelling", []Record{
			with(up(1), func(r *Record) { r.Meta = &RecordMeta{Frequency: "monthly"} }),
			with(up(2), func(r *Record) { r.Meta = &RecordMeta{Frequency: Hourly, Name: "n"} }),
			with(up(3), func(r *Record) { r.Meta = &RecordMeta{} }),
		}, true},
		{"id of the maximum length", []Record{with(up(1), func(r *Record) { r.SeriesID = strings.Repeat("i", MaxSeriesIDLen) })}, true},
		{"id in UTF-8", []Record{with(up(1), func(r *Record) { r.SeriesID = "Zürich/Ölpreis €" })}, true},
		{"negative period", []Record{with(up(1), func(r *Record) { r.Period = -86400 * 365 * 50 })}, true},

		{"seq 0", []Record{up(0)}, false},
		{"duplicate seq", []Record{up(3), up(3)}, false},
		{"decreasing seq", []Record{up(3), up(2)}, false},
		{"decreasing after increasing", []Record{up(1), up(4), up(2)}, false},
		{"unknown op 0", []Record{with(up(1), func(r *Record) { r.Op = 0 })}, false},
		{"unknown op 3", []Record{with(up(1), func(r *Record) { r.Op = 3 })}, false},
		{"empty id", []Record{with(up(1), func(r *Record) { r.SeriesID = "" })}, false},
		{"id too long", []Record{with(up(1), func(r *Record) { r.SeriesID = strings.Repeat("i", MaxSeriesIDLen+1) })}, false},
		{"id with a NUL byte", []Record{with(up(1), func(r *Record) { r.SeriesID = "A\x00B" })}, false},
		{"id of invalid UTF-8", []Record{with(up(1), func(r *Record) { r.SeriesID = "A\xffB" })}, false},
		{"NaN", []Record{with(up(1), func(r *Record) { r.Value = math.NaN() })}, false},
		{"+Inf", []Record{with(up(1), func(r *Record) { r.Value = math.Inf(1) })}, false},
		{"-Inf", []Record{up(1), with(up(2), func(r *Record) { r.Value = math.Inf(-1) })}, false},
		{"unknown frequency", []Record{with(up(1), func(r *Record) { r.Meta = &RecordMeta{Frequency: "fortnightly"} })}, false},
		{"name too long", []Record{with(up(1), func(r *Record) { r.Meta = &RecordMeta{Name: long} })}, false},
		{"unit too long", []Record{with(up(1), func(r *Record) { r.Meta = &RecordMeta{Unit: long} })}, false},
		{"source too long", []Record{with(up(1), func(r *Record) { r.Meta = &RecordMeta{Source: long} })}, false},
		// A period the snapshot format cannot hold would be accepted into
		// the log and then make every later compaction fail.
		{"period far in the future", []Record{with(up(1), func(r *Record) { r.Period = math.MaxInt64 })}, false},
		{"period far in the past", []Record{with(up(1), func(r *Record) { r.Period = math.MinInt64 })}, false},
		{"delete far in the future", []Record{with(up(1), func(r *Record) { r.Op, r.Period = Delete, math.MaxInt64 })}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateRecords(tc.batch)
			if tc.ok && err != nil {
				t.Fatalf("valid batch refused: %v", err)
			}
			if !tc.ok {
				if err == nil {
					t.Fatal("invalid batch accepted")
				}
				if !errors.Is(err, ErrBadRecord) {
					t.Fatalf("error does not wrap ErrBadRecord: %v", err)
				}
			}
		})
	}
}

// TestValidateAgreesWithWrite: every period Validate accepts, the snapshot
// writer accepts too (after the delta normalized it), so an acknowledged
// record can always be compacted.
func TestValidateAgreesWithWrite(t *testing.T) {
	freqs := []Frequency{Hourly, Daily, Weekly, Monthly, Quarterly, Annual}
	for _, p := range []int64{MinRecordPeriod, MaxPeriod, -1, 0} {
		tb := &Table{}
		for i, f := range freqs {
			if err := ValidateRecords([]Record{{Seq: 1, Op: Upsert, SeriesID: "A", Period: p, Value: 1, Meta: &RecordMeta{Frequency: f}}}); err != nil {
				t.Fatalf("period %d refused: %v", p, err)
			}
			tb.Series = append(tb.Series, SeriesMeta{ID: string(f), Frequency: f})
			tb.Append(uint32(i), f.Normalize(p), 1)
		}
		if _, _, err := Write(t.TempDir()+"/s", tb, WriteOptions{Dataset: "d"}); err != nil {
			t.Errorf("period %d: Validate accepts what Write refuses: %v", p, err)
		}
	}
	for _, p := range []int64{MinRecordPeriod - 1, MaxPeriod + 1} {
		if err := ValidateRecords([]Record{{Seq: 1, Op: Upsert, SeriesID: "A", Period: p, Value: 1}}); err == nil {
			t.Errorf("period %d accepted", p)
		}
	}
}

// TestEncodedSize: EncodedSize is exactly what EncodeBatch writes for a
// record, at every varint width of seq, period and string lengths.
func TestEncodedSize(t *testing.T) {
	var seqs []uint64
	var periods []int64
	for s := uint(0); s < 64; s += 7 {
		seqs = append(seqs, 1<<s-1, 1<<s, 1<<s+1)
		periods = append(periods, int64(1)<<s-1, int64(1)<<s, -(int64(1) << s), -(int64(1)<<s + 1))
	}
	seqs = append(seqs, math.MaxUint64)
	periods = append(periods, math.MaxInt64, math.MinInt64, 0, -1)
	strs := []string{"", "A", strings.Repeat("x", 127), strings.Repeat("x", 128), strings.Repeat("x", 16384), "Zürich €"}
	var recs []Record
	for i, seq := range seqs {
		for j, p := range periods {
			r := Record{Seq: seq, Op: Op(1 + (i+j)%2), Period: p, Value: float64(j), SeriesID: strs[(i+j)%len(strs)]}
			if (i+j)%3 != 0 {
				r.Meta = &RecordMeta{Name: strs[i%len(strs)], Unit: strs[j%len(strs)], Source: strs[(i*j)%len(strs)], Frequency: Frequency(strs[(i+2*j)%len(strs)])}
			}
			recs = append(recs, r)
		}
	}
	total := BatchHeaderSize(len(recs))
	for i := range recs {
		got, want := EncodedSize(&recs[i]), len(EncodeBatch(nil, recs[i:i+1]))-BatchHeaderSize(1)
		if got != want {
			t.Fatalf("record %+v: EncodedSize %d, encoded %d bytes", recs[i], got, want)
		}
		total += got
	}
	if n := len(EncodeBatch(nil, recs)); n != total {
		t.Fatalf("batch of %d records: sizes sum to %d, encoded %d bytes", len(recs), total, n)
	}
	for _, n := range []int{0, 1, 127, 128, 16383, 16384, 1 << 21} {
		if got, want := BatchHeaderSize(n), len(binary.AppendUvarint(nil, uint64(n))); got != want {
			t.Errorf("BatchHeaderSize(%d) = %d, want %d", n, got, want)
		}
	}
}
