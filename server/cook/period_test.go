package cook

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

func unix(y int, m time.Month, d, h, mi, s int) int64 {
	return time.Date(y, m, d, h, mi, s, 0, time.UTC).Unix()
}

func TestParsePeriod(t *testing.T) {
	tests := []struct {
		in   string
		want int64
	}{
		{"2001-01-01", unix(2001, 1, 1, 0, 0, 0)},
		{"1999-12-31", unix(1999, 12, 31, 0, 0, 0)},
		{"2000-02-29", unix(2000, 2, 29, 0, 0, 0)},
		{"1900-03-01", unix(1900, 3, 1, 0, 0, 0)},
		{"1969-12-31", unix(1969, 12, 31, 0, 0, 0)},
		{"0001-01-01", unix(1, 1, 1, 0, 0, 0)},
		{"2001/03/15", unix(2001, 3, 15, 0, 0, 0)},
		{"2001-3-5", unix(2001, 3, 5, 0, 0, 0)},
		{"  2001-01-01 ", unix(2001, 1, 1, 0, 0, 0)},
		{"2010-01-01T01:00:00", unix(2010, 1, 1, 1, 0, 0)},
		{"2010-01-01 01:00:00", unix(2010, 1, 1, 1, 0, 0)},
		{"2010-01-01t23:59:59", unix(2010, 1, 1, 23, 59, 59)},
		{"2010-01-01T01:30", unix(2010, 1, 1, 1, 30, 0)},
		{"2010-01-01T01:00:00.123456", unix(2010, 1, 1, 1, 0, 0)},
		{"2010-01-01T01:00:00,5", unix(2010, 1, 1, 1, 0, 0)},
		{"2010-01-01T01:00:00Z", unix(2010, 1, 1, 1, 0, 0)},
		{"2010-01-01T01:00:00.5Z", unix(2010, 1, 1, 1, 0, 0)},
		{"2010-01-01T01:00:00+02:00", unix(2009, 12, 31, 23, 0, 0)},
		{"2010-01-01T01:00:00-05:30", unix(2010, 1, 1, 6, 30, 0)},
		{"2010-01-01T01:00:00+0200", unix(2009, 12, 31, 23, 0, 0)},
		{"2010-01-01T01:00:00+02", unix(2009, 12, 31, 23, 0, 0)},
		{"2010-01-01 01:00:00 +00:00", unix(2010, 1, 1, 1, 0, 0)},
		{"2010-01-01T24:00:00", unix(2010, 1, 2, 0, 0, 0)},
		{"2001", unix(2001, 1, 1, 0, 0, 0)},
		{"2001-03", unix(2001, 3, 1, 0, 0, 0)},
		{"200103", unix(2001, 3, 1, 0, 0, 0)},
		{"2001M03", unix(2001, 3, 1, 0, 0, 0)},
		{"2001Q1", unix(2001, 1, 1, 0, 0, 0)},
		{"2001Q4", unix(2001, 10, 1, 0, 0, 0)},
		{"2001-Q2", unix(2001, 4, 1, 0, 0, 0)},
		{"2001q3", unix(2001, 7, 1, 0, 0, 0)},
		{"2001 Q3", unix(2001, 7, 1, 0, 0, 0)},
		{"20010315", unix(2001, 3, 15, 0, 0, 0)},
		{"Jan 1 2000", unix(2000, 1, 1, 0, 0, 0)},
		{"Mar 31 2010", unix(2010, 3, 31, 0, 0, 0)},
		{"January 1, 2000", unix(2000, 1, 1, 0, 0, 0)},
		{"september 30, 2000", unix(2000, 9, 30, 0, 0, 0)},
		{"Sept 30 2000", unix(2000, 9, 30, 0, 0, 0)},
		{"Jan. 5, 2000", unix(2000, 1, 5, 0, 0, 0)},
		{"Dec 25,2000", unix(2000, 12, 25, 0, 0, 0)},
		{"MAY 2000", unix(2000, 5, 1, 0, 0, 0)},
		{"Jan-2000", unix(2000, 1, 1, 0, 0, 0)},
		{"1 Jan 2000", unix(2000, 1, 1, 0, 0, 0)},
		{"15-Feb-2001", unix(2001, 2, 15, 0, 0, 0)},
	}
	for _, tt := range tests {
		got, err := ParsePeriod(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("ParsePeriod(%q) = %d, %v; want %d (%s)", tt.in, got, err, tt.want, time.Unix(tt.want, 0).UTC())
		}
		gotb, err := ParsePeriod([]byte(tt.in))
		if err != nil || gotb != tt.want {
			t.Errorf("ParsePeriod([]byte %q) = %d, %v; want %d", tt.in, gotb, err, tt.want)
		}
	}
}

func TestParsePeriodBad(t *testing.T) {
	for _, in := range []string{
		"", " ", "abc", "2001-13-01", "2001-02-29", "2001-04-31", "2001-00-10", "2001-01-00",
		"2001Q0", "2001Q5", "2001-Q", "20011", "2001-01-01T", "2001-01-01T25:00:00",
		"2001-01-01T24:00:01", "2001-01-01T12:60:00", "2001-01-01T12:00:60", "2001-01-01T1:00",
		"2001-01-01T01:00:00+2", "2001-01-01T01:00:00+25:00", "2001-01-01T01:00:00ZZ",
		"2001-01-01T01:00:00.", "2001/01-01", "2001/01/01T00:00", "200113", "20010230",
		"Foo 1 2000", "Jan 32 2000", "Jan 1", "Jan 1 20000", "Ja 1 2000", "Jan1 2000",
		"1 Jan", "12345", "123", "2001-01-01x", "-2001", "2001.5", "NaN", "Januaryy 1 2000",
	} {
		v, err := ParsePeriod(in)
		if err == nil {
			t.Errorf("ParsePeriod(%q) = %d (%s), want error", in, v, time.Unix(v, 0).UTC())
			continue
		}
		if !errors.Is(err, ErrBadPeriod) || !strings.Contains(err.Error(), `"`+in+`"`) {
			t.Errorf("ParsePeriod(%q) error %q does not name the text or wrap ErrBadPeriod", in, err)
		}
	}
}

// TestParsePeriodAgainstTime checks random instants in every layout against
// the standard library's formatting.
func TestParsePeriodAgainstTime(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	layouts := []struct {
		layout string
		trunc  func(time.Time) time.Time
	}{
		{"2006-01-02", day},
		{"20060102", day},
		{"2006-01-02T15:04:05", sec},
		{"2006-01-02 15:04:05.000", sec},
		{"2006-01-02T15:04:05Z07:00", sec},
		{"Jan 2 2006", day},
		{"January 2, 2006", day},
		{"2 Jan 2006", day},
		{"2006-01", month},
		{"200601", month},
		{"2006", func(t time.Time) time.Time { return time.Date(t.Year(), 1, 1, 0, 0, 0, 0, time.UTC) }},
	}
	zones := []*time.Location{time.UTC, time.FixedZone("x", 5*3600+1800), time.FixedZone("y", -8*3600)}
	for range 20000 {
		tm := time.Unix(r.Int64N(unix(2200, 1, 1, 0, 0, 0)-unix(1800, 1, 1, 0, 0, 0))+unix(1800, 1, 1, 0, 0, 0), int64(r.IntN(1e9)))
		for _, l := range layouts {
			in := tm.In(time.UTC)
			if strings.Contains(l.layout, "Z07") {
				in = tm.In(zones[r.IntN(len(zones))])
			}
			s := in.Format(l.layout)
			want := l.trunc(tm.UTC()).Unix()
			if strings.Contains(l.layout, "Z07") {
				want = tm.Unix()
			}
			got, err := ParsePeriod(s)
			if err != nil || got != want {
				t.Fatalf("ParsePeriod(%q) = %d, %v; want %d", s, got, err, want)
			}
		}
	}
}

func day(t time.Time) time.Time { return t.Truncate(24 * time.Hour) }
func sec(t time.Time) time.Time { return t.Truncate(time.Second) }
func month(t time.Time) time.Time {
	return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
}

func FuzzParsePeriod(f *testing.F) {
	for _, s := range []string{"2001-01-01", "2010-01-01T01:00:00.5+02:00", "2001Q1", "2001-Q4", "200103",
		"20010315", "Jan 1 2000", "January 1, 2000", "1 Jan 2000", "2001", "2001-03", "Sept 1 2000",
		"2001-01-01 24:00", "Jan-2000", "", "9999-12-31T23:59:59Z"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParsePeriod(s)
		if err != nil {
			return
		}
		// Whatever parses must be a real instant; round-trip the ISO forms
		// through the standard library.
		tm := time.Unix(v, 0).UTC()
		if tm.Year() < -1 || tm.Year() > 10001 { // year 0 less an offset is year -1
			t.Fatalf("ParsePeriod(%q) = %d: year %d", s, v, tm.Year())
		}
		if len(s) == 10 && s[4] == '-' && s[7] == '-' {
			want, err := time.Parse("2006-01-02", s)
			if err == nil && want.Unix() != v {
				t.Fatalf("ParsePeriod(%q) = %d, time.Parse says %d", s, v, want.Unix())
			}
		}
		if len(s) == 19 && s[10] == 'T' {
			want, err := time.Parse("2006-01-02T15:04:05", s)
			if err == nil && want.Unix() != v {
				t.Fatalf("ParsePeriod(%q) = %d, time.Parse says %d", s, v, want.Unix())
			}
		}
	})
}
