package delta

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/energyscope/energyscope/localcache/format"
)

func TestValidate(t *testing.T) {
	up := func(seq uint64) Record {
		return Record{Seq: seq, Op: Upsert, SeriesID: "A", Period: 86400, Value: 1}
	}
	with := func(r Record, f func(*Record)) Record { f(&r); return r }
	long := strings.Repeat("x", maxMetaLen+1)
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
			with(up(1), func(r *Record) { r.Meta = &Meta{Frequency: "monthly"} }),
			with(up(2), func(r *Record) { r.Meta = &Meta{Frequency: format.Hourly, Name: "n"} }),
			with(up(3), func(r *Record) { r.Meta = &Meta{} }),
		}, true},
		{"id of the maximum length", []Record{with(up(1), func(r *Record) { r.SeriesID = strings.Repeat("i", maxIDLen) })}, true},
		{"id in UTF-8", []Record{with(up(1), func(r *Record) { r.SeriesID = "Zürich/Ölpreis €" })}, true},
		{"negative period", []Record{with(up(1), func(r *Record) { r.Period = -86400 * 365 * 50 })}, true},

		{"seq 0", []Record{up(0)}, false},
		{"duplicate seq", []Record{up(3), up(3)}, false},
		{"decreasing seq", []Record{up(3), up(2)}, false},
		{"decreasing after increasing", []Record{up(1), up(4), up(2)}, false},
		{"unknown op 0", []Record{with(up(1), func(r *Record) { r.Op = 0 })}, false},
		{"unknown op 3", []Record{with(up(1), func(r *Record) { r.Op = 3 })}, false},
		{"empty id", []Record{with(up(1), func(r *Record) { r.SeriesID = "" })}, false},
		{"id too long", []Record{with(up(1), func(r *Record) { r.SeriesID = strings.Repeat("i", maxIDLen+1) })}, false},
		{"id with a NUL byte", []Record{with(up(1), func(r *Record) { r.SeriesID = "A\x00B" })}, false},
		{"id of invalid UTF-8", []Record{with(up(1), func(r *Record) { r.SeriesID = "A\xffB" })}, false},
		{"NaN", []Record{with(up(1), func(r *Record) { r.Value = math.NaN() })}, false},
		{"+Inf", []Record{with(up(1), func(r *Record) { r.Value = math.Inf(1) })}, false},
		{"-Inf", []Record{up(1), with(up(2), func(r *Record) { r.Value = math.Inf(-1) })}, false},
		{"unknown frequency", []Record{with(up(1), func(r *Record) { r.Meta = &Meta{Frequency: "fortnightly"} })}, false},
		{"name too long", []Record{with(up(1), func(r *Record) { r.Meta = &Meta{Name: long} })}, false},
		{"unit too long", []Record{with(up(1), func(r *Record) { r.Meta = &Meta{Unit: long} })}, false},
		{"source too long", []Record{with(up(1), func(r *Record) { r.Meta = &Meta{Source: long} })}, false},
		// A period the snapshot format cannot hold would be accepted into
		// the log and then make every later compaction fail.
		{"period far in the future", []Record{with(up(1), func(r *Record) { r.Period = math.MaxInt64 })}, false},
		{"period far in the past", []Record{with(up(1), func(r *Record) { r.Period = math.MinInt64 })}, false},
		{"delete far in the future", []Record{with(up(1), func(r *Record) { r.Op, r.Period = Delete, math.MaxInt64 })}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := Validate(tc.batch)
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
	freqs := []format.Frequency{format.Hourly, format.Daily, format.Weekly, format.Monthly, format.Quarterly, format.Annual}
	for _, p := range []int64{minPeriod, maxPeriod, -1, 0} {
		tb := &format.Table{}
		for i, f := range freqs {
			if err := Validate([]Record{{Seq: 1, Op: Upsert, SeriesID: "A", Period: p, Value: 1, Meta: &Meta{Frequency: f}}}); err != nil {
				t.Fatalf("period %d refused: %v", p, err)
			}
			tb.Series = append(tb.Series, format.SeriesMeta{ID: string(f), Frequency: f})
			tb.Append(uint32(i), f.Normalize(p), 1)
		}
		if _, _, err := format.Write(t.TempDir()+"/s", tb, format.WriteOptions{Dataset: "d"}); err != nil {
			t.Errorf("period %d: Validate accepts what Write refuses: %v", p, err)
		}
	}
	for _, p := range []int64{minPeriod - 1, maxPeriod + 1} {
		if err := Validate([]Record{{Seq: 1, Op: Upsert, SeriesID: "A", Period: p, Value: 1}}); err == nil {
			t.Errorf("period %d accepted", p)
		}
	}
}
