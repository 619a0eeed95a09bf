package functions

import (
	"math"
	"testing"
	"time"

	"github.com/energyscope/energyscope/internal/calendar"
)

func unix(y int, m time.Month, d, hh, mm, ss int) int64 {
	return time.Date(y, m, d, hh, mm, ss, 0, time.UTC).Unix()
}

func TestExcelSerial(t *testing.T) {
	for _, c := range []struct {
		t      int64
		serial float64
	}{
		{0, 25569},
		{unix(2000, 1, 1, 0, 0, 0), 36526},
		{unix(2000, 3, 1, 0, 0, 0), 36586},
		{unix(2020, 1, 1, 12, 0, 0), 43831.5},
		{unix(2020, 1, 1, 6, 0, 0), 43831.25},
		{unix(1900, 1, 1, 0, 0, 0), 1},
		{unix(1900, 2, 28, 0, 0, 0), 59},
		{unix(1900, 3, 1, 0, 0, 0), 61}, // 60 is Excel's phantom 1900-02-29
		{unix(1899, 12, 31, 0, 0, 0), 0},
		{unix(9999, 12, 31, 0, 0, 0), 2958465},
		{unix(1969, 12, 31, 18, 0, 0), 25568.75},
		{MinTime, minSerial},
	} {
		if got := ExcelSerial(c.t); got != c.serial {
			t.Errorf("ExcelSerial(%s) = %v, want %v", time.Unix(c.t, 0).UTC(), got, c.serial)
		}
		if got := FromSerial(c.serial); got != c.t {
			t.Errorf("FromSerial(%v) = %s, want %s", c.serial, time.Unix(got, 0).UTC(), time.Unix(c.t, 0).UTC())
		}
	}
	for _, c := range []struct {
		serial float64
		t      int64
	}{
		{60, unix(1900, 3, 1, 0, 0, 0)},
		{43831.999999999, unix(2020, 1, 2, 0, 0, 0)}, // rounds to the next day
		{43831 + 1.0/3, unix(2020, 1, 1, 8, 0, 0)},
		{math.NaN(), MinTime},
		{math.Inf(1), MaxTime},
		{math.Inf(-1), MinTime},
		{1e300, MaxTime},
		{2958465.9999999, MaxTime},
	} {
		if got := FromSerial(c.serial); got != c.t {
			t.Errorf("FromSerial(%v) = %d, want %d", c.serial, got, c.t)
		}
	}
}

func TestSerialRoundTrip(t *testing.T) {
	const step = 9_999_991 // seconds, prime: visits every time of day over the range
	for u := MinTime; u <= MaxTime; u += step {
		if got := FromSerial(ExcelSerial(u)); got != u {
			t.Fatalf("FromSerial(ExcelSerial(%d)) = %d", u, got)
		}
	}
	for u := int64(-3 * secondsPerDay); u < 3*secondsPerDay; u += 997 {
		if got := FromSerial(ExcelSerial(u)); got != u {
			t.Fatalf("FromSerial(ExcelSerial(%d)) = %d", u, got)
		}
	}
}

func TestCalendar(t *testing.T) {
	for _, c := range []struct {
		t         int64
		per       byte
		start, nx int64
	}{
		{unix(2010, 1, 1, 13, 0, 0), 'D', unix(2010, 1, 1, 0, 0, 0), unix(2010, 1, 2, 0, 0, 0)},
		{unix(2010, 1, 1, 13, 0, 0), 'W', unix(2009, 12, 28, 0, 0, 0), unix(2010, 1, 4, 0, 0, 0)},
		{unix(2010, 1, 4, 0, 0, 0), 'W', unix(2010, 1, 4, 0, 0, 0), unix(2010, 1, 11, 0, 0, 0)},
		{unix(1969, 12, 31, 0, 0, 0), 'W', unix(1969, 12, 29, 0, 0, 0), unix(1970, 1, 5, 0, 0, 0)},
		{unix(2024, 2, 29, 5, 0, 0), 'M', unix(2024, 2, 1, 0, 0, 0), unix(2024, 3, 1, 0, 0, 0)},
		{unix(2024, 12, 31, 5, 0, 0), 'M', unix(2024, 12, 1, 0, 0, 0), unix(2025, 1, 1, 0, 0, 0)},
		{unix(2024, 12, 31, 5, 0, 0), 'Q', unix(2024, 10, 1, 0, 0, 0), unix(2025, 1, 1, 0, 0, 0)},
		{unix(2024, 5, 31, 5, 0, 0), 'Q', unix(2024, 4, 1, 0, 0, 0), unix(2024, 7, 1, 0, 0, 0)},
		{unix(2024, 5, 31, 5, 0, 0), 'A', unix(2024, 1, 1, 0, 0, 0), unix(2025, 1, 1, 0, 0, 0)},
	} {
		s, n := calendar.Frequency(c.per).Bucket(c.t)
		if s != c.start || n != c.nx {
			t.Errorf("Bucket(%s, %c) = %s, %s", time.Unix(c.t, 0).UTC(), c.per, time.Unix(s, 0).UTC(), time.Unix(n, 0).UTC())
		}
	}
}

// dateNow is a leap day, to show month-end clamping.
var dateNow = time.Date(2024, 2, 29, 10, 30, 0, 0, time.UTC)

type dateCase struct {
	in         string
	start, end int64  // when err is ""
	err        string // the error message, same for start and end
}

func dateCases() []dateCase {
	day := func(y int, m time.Month, d int) (int64, int64) {
		s := unix(y, m, d, 0, 0, 0)
		return s, s + secondsPerDay - 1
	}
	span := func(y int, m time.Month, d int, y2 int, m2 time.Month, d2 int) (int64, int64) {
		return unix(y, m, d, 0, 0, 0), unix(y2, m2, d2, 23, 59, 59)
	}
	c := func(in string, s, e int64) dateCase { return dateCase{in: in, start: s, end: e} }
	bad := func(in, msg string) dateCase { return dateCase{in: in, err: msg} }
	at := func(in string, t int64) dateCase { return dateCase{in: in, start: t, end: t} }
	cases := []dateCase{
		c("", MinTime, MaxTime),
		c("   ", MinTime, MaxTime),
	}
	add := func(in string, s, e int64) { cases = append(cases, c(in, s, e)) }
	add2 := func(in string) func(int64, int64) { return func(s, e int64) { add(in, s, e) } }
	add2("2020")(span(2020, 1, 1, 2020, 12, 31))
	add2(" 2020 ")(span(2020, 1, 1, 2020, 12, 31))
	add2("2020-03")(span(2020, 3, 1, 2020, 3, 31))
	add2("2020-02")(span(2020, 2, 1, 2020, 2, 29))
	add2("2021/02")(span(2021, 2, 1, 2021, 2, 28))
	add2("202003")(span(2020, 3, 1, 2020, 3, 31))
	add2("2020-Q2")(span(2020, 4, 1, 2020, 6, 30))
	add2("2020q4")(span(2020, 10, 1, 2020, 12, 31))
	add2("2020/Q1")(span(2020, 1, 1, 2020, 3, 31))
	add2("2020-01-02")(day(2020, 1, 2))
	add2("2020/01/02")(day(2020, 1, 2))
	add2("2020-1-2")(day(2020, 1, 2))
	add2("20200102")(day(2020, 1, 2))
	add2("0001-01-01")(day(1, 1, 1))
	add2("9999-12-31")(day(9999, 12, 31))
	add2("Jan 2 2020")(day(2020, 1, 2))
	add2("jan 2, 2020")(day(2020, 1, 2))
	add2("2 Jan 2020")(day(2020, 1, 2))
	add2("2-JAN-2020")(day(2020, 1, 2))
	add2("January 2, 2020")(day(2020, 1, 2))
	add2("Mar 2020")(span(2020, 3, 1, 2020, 3, 31))
	add2("today")(day(2024, 2, 29))
	add2("TODAY")(day(2024, 2, 29))
	add2("ytd")(day(2024, 1, 1))
	add2("QTD")(day(2024, 1, 1))
	add2("mtd")(day(2024, 2, 1))
	add2("-1Y")(day(2023, 2, 28))
	add2("-1y")(day(2023, 2, 28))
	add2("+1Y")(day(2025, 2, 28))
	add2("-4Y")(day(2020, 2, 29))
	add2("-1M")(day(2024, 1, 29))
	add2("-6M")(day(2023, 8, 29))
	add2("-1Q")(day(2023, 11, 29))
	add2("-30D")(day(2024, 1, 30))
	add2("-10W")(day(2023, 12, 21))
	add2("+0D")(day(2024, 2, 29))
	add2("-2023Y")(day(1, 2, 28))
	// Excel serials typed as text read as the numbers do (es get has no other way to give one).
	add2("43831")(day(2020, 1, 1))
	add2("36526")(day(2000, 1, 1))
	add2("99999")(day(2173, 10, 13))
	add2("2020M03")(span(2020, 3, 1, 2020, 3, 31))
	add2("2020m12")(span(2020, 12, 1, 2020, 12, 31))
	add2("2020 Q2")(span(2020, 4, 1, 2020, 6, 30))
	cases = append(cases,
		at("now", dateNow.Unix()),
		at("43831.5", unix(2020, 1, 1, 12, 0, 0)),
		at("43831.25", unix(2020, 1, 1, 6, 0, 0)),
		at("2020-01-02T03:04:05Z", unix(2020, 1, 2, 3, 4, 5)),
		at("2020-01-02t03:04:05z", unix(2020, 1, 2, 3, 4, 5)),
		at("2020-01-02T03:04:05", unix(2020, 1, 2, 3, 4, 5)),
		at("2020-01-02 03:04", unix(2020, 1, 2, 3, 4, 0)),
		at("2020-01-02T3:04", unix(2020, 1, 2, 3, 4, 0)),
		at("2020-01-02T03:04:05.123+01:00", unix(2020, 1, 2, 2, 4, 5)),
		at("2020-01-02T03:04:05-0130", unix(2020, 1, 2, 4, 34, 5)),
		at("0001-01-01T00:00:00Z", MinTime),
		at("9999-12-31T23:59:59Z", MaxTime),
		bad("2020-13-45", `cannot read date "2020-13-45"`),
		bad("2020-02-30", `cannot read date "2020-02-30"`),
		bad("2021-02-29", `cannot read date "2021-02-29"`),
		bad("2020-00", `cannot read date "2020-00"`),
		bad("2020-Q5", `cannot read date "2020-Q5"`),
		bad("2020-Q1-01", `cannot read date "2020-Q1-01"`),
		bad("2020-01/02", `cannot read date "2020-01/02"`),
		bad("2020-01-02x", `cannot read date "2020-01-02x"`),
		bad("2020-01-02T25:00", `cannot read date "2020-01-02T25:00"`),
		bad("2020-01-02T10", `cannot read date "2020-01-02T10"`),
		bad("2020-01-02T10:00:00.", `cannot read date "2020-01-02T10:00:00."`),
		bad("2020-01-02T10:00+99:00", `cannot read date "2020-01-02T10:00+99:00"`),
		bad("20201301", `cannot read date "20201301"`),
		bad("1234567", `cannot read date "1234567"`),
		bad("abc", `cannot read date "abc"`),
		bad("-", `cannot read date "-"`),
		bad("-1", `cannot read date "-1"`),
		bad("-Y", `cannot read date "-Y"`),
		bad("1Y", `cannot read date "1Y"`),
		bad("-1X", `cannot read date "-1X"`),
		bad("-1.5Y", `cannot read date "-1.5Y"`),
		bad("99999-01-01", `date "99999-01-01" out of range: years 1 to 9999`),
		bad("00000", `date "00000" out of range: years 1 to 9999`),
		bad("0.5", `date "0.5" out of range: years 1 to 9999`),
		bad("2958466.5", `date "2958466.5" out of range: years 1 to 9999`),
		bad("2020M13", `cannot read date "2020M13"`),
		bad("2020M3", `cannot read date "2020M3"`),
		bad("2020 Q5", `cannot read date "2020 Q5"`),
		bad("43831.", `cannot read date "43831."`),
		bad("0000", `date "0000" out of range: years 1 to 9999`),
		bad("0000-01-01", `date "0000-01-01" out of range: years 1 to 9999`),
		bad("-2025Y", `date "-2025Y" out of range: years 1 to 9999`),
		bad("+99999999Y", `date "+99999999Y" out of range: years 1 to 9999`),
		bad("9999-12-31T23:59:59-01:00", `date "9999-12-31T23:59:59-01:00" out of range: years 1 to 9999`),
		bad("2020-01-01 "+string(make([]byte, 80)), `cannot read date "2020-01-01 \x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00..."`),
	)
	return cases
}

func TestParseDate(t *testing.T) {
	for _, c := range dateCases() {
		for _, isEnd := range []bool{false, true} {
			got, err := ParseDate(c.in, dateNow, isEnd)
			want := c.start
			if isEnd {
				want = c.end
			}
			switch {
			case c.err != "":
				if err == nil || err.Error() != c.err {
					t.Errorf("ParseDate(%q, end=%v) = %d, %v; want error %s", c.in, isEnd, got, err, c.err)
				}
			case err != nil:
				t.Errorf("ParseDate(%q, end=%v): %v", c.in, isEnd, err)
			case got != want:
				t.Errorf("ParseDate(%q, end=%v) = %s, want %s", c.in, isEnd, time.Unix(got, 0).UTC(), time.Unix(want, 0).UTC())
			}
		}
	}
}

// TestParseDateLocalToday: "today" is the calendar date where the user is, not in UTC.
func TestParseDateLocalToday(t *testing.T) {
	est := time.FixedZone("EST", -5*3600)
	now := time.Date(2024, 2, 29, 23, 30, 0, 0, est) // already March 1st in UTC
	got, err := ParseDate("today", now, false)
	if err != nil || got != unix(2024, 2, 29, 0, 0, 0) {
		t.Fatalf("today = %s, %v", time.Unix(got, 0).UTC(), err)
	}
}

func TestParseNumberDate(t *testing.T) {
	for _, c := range []struct {
		f          float64
		start, end int64
		err        string
	}{
		{f: 0, start: MinTime, end: MaxTime},
		{f: 2020, start: unix(2020, 1, 1, 0, 0, 0), end: unix(2020, 12, 31, 23, 59, 59)},
		{f: 20200102, start: unix(2020, 1, 2, 0, 0, 0), end: unix(2020, 1, 2, 23, 59, 59)},
		{f: 43831, start: unix(2020, 1, 1, 0, 0, 0), end: unix(2020, 1, 1, 23, 59, 59)},
		{f: 43831.5, start: unix(2020, 1, 1, 12, 0, 0), end: unix(2020, 1, 1, 12, 0, 0)},
		{f: 1, start: unix(1900, 1, 1, 0, 0, 0), end: unix(1900, 1, 1, 23, 59, 59)},
		{f: 999.5, start: unix(1902, 9, 25, 12, 0, 0), end: unix(1902, 9, 25, 12, 0, 0)},
		{f: 2958465, start: unix(9999, 12, 31, 0, 0, 0), end: MaxTime},
		{f: 2020.5, start: FromSerial(2020.5), end: FromSerial(2020.5)},
		{f: 2958466, err: `date "2958466" out of range: years 1 to 9999`},
		{f: 20201301, err: `cannot read date "20201301"`},
		{f: -1, err: `date "-1" out of range: years 1 to 9999`},
		{f: 0.5, err: `date "0.5" out of range: years 1 to 9999`},
		{f: math.NaN(), err: `cannot read date "NaN"`},
		{f: math.Inf(1), err: `cannot read date "+Inf"`},
	} {
		for _, isEnd := range []bool{false, true} {
			got, err := parseNumberDate(c.f, isEnd)
			want := c.start
			if isEnd {
				want = c.end
			}
			switch {
			case c.err != "":
				if err == nil || err.Error() != c.err {
					t.Errorf("parseNumberDate(%v) = %d, %v; want error %s", c.f, got, err, c.err)
				}
			case err != nil || got != want:
				t.Errorf("parseNumberDate(%v, end=%v) = %s, %v; want %s", c.f, isEnd, time.Unix(got, 0).UTC(), err, time.Unix(want, 0).UTC())
			}
		}
	}
}

func TestFormatTime(t *testing.T) {
	for _, c := range []struct {
		t    int64
		want string
	}{
		{unix(2020, 1, 2, 0, 0, 0), "2020-01-02"},
		{unix(2020, 1, 2, 23, 59, 59), "2020-01-02"},
		{unix(2020, 1, 2, 10, 30, 0), "2020-01-02 10:30"},
		{unix(2020, 1, 2, 10, 30, 5), "2020-01-02 10:30:05"},
	} {
		if got := formatTime(c.t); got != c.want {
			t.Errorf("formatTime = %q, want %q", got, c.want)
		}
	}
}
