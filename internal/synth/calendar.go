package synth

import (
	"time"

	"github.com/energyscope/energyscope/internal/calendar"
)

// Calendar arithmetic on proleptic-Gregorian civil dates is internal/calendar's, done
// with plain integers so the row loop never touches time.Time; these adapt it to the
// ints the cursor keeps.

func daysFromCivil(y, m, d int) int64 {
	return calendar.DaysFromCivil(int64(y), int64(m), int64(d))
}

func civilFromDays(z int64) (y, m, d int) {
	yy, mm, dd := calendar.CivilFromDays(z)
	return int(yy), int(mm), int(dd)
}

func daysIn(y, m int) int { return int(calendar.DaysInMonth(int64(y), int64(m))) }

// Frequency codes as they appear in ids and in the frequency column.
const (
	freqH = iota
	freqD
	freqW
	freqM
	freqA
	numFreq
)

var freqCode = [numFreq]string{"H", "D", "W", "M", "A"}
var freqWord = [numFreq]string{"Hourly", "Daily", "Weekly", "Monthly", "Annual"}

// minDay is 0001-01-01, the earliest period we ever emit (a Monday).
var minDay = daysFromCivil(1, 1, 1)

// bucket is a period index on a frequency's own axis:
// H: hours since 1970-01-01T00, D: days since 1970-01-01,
// W: weeks since the Monday 1970-01-05 (negative before),
// M: months since 0000-01 (y*12+m-1), A: the year.
type bucket = int64

// weekEpoch is the day number of Monday 1970-01-05.
const weekEpoch = 4

// lastBucket returns the bucket containing instant t (t in UTC).
func lastBucket(f int, t time.Time) bucket {
	y, mo, d := t.Date()
	day := daysFromCivil(y, int(mo), d)
	switch f {
	case freqH:
		return day*24 + int64(t.Hour())
	case freqD:
		return day
	case freqW:
		return calendar.FloorDiv(day-weekEpoch, 7)
	case freqM:
		return int64(y)*12 + int64(mo) - 1
	default:
		return int64(y)
	}
}

// firstBucketOnOrAfter returns the first bucket of frequency f starting on
// or after day (a day number).
func firstBucketOnOrAfter(f int, day int64) bucket {
	y, m, d := civilFromDays(day)
	switch f {
	case freqH:
		return day * 24
	case freqD:
		return day
	case freqW:
		return -calendar.FloorDiv(-(day - weekEpoch), 7) // ceil
	case freqM:
		b := int64(y)*12 + int64(m) - 1
		if d > 1 {
			b++
		}
		return b
	default:
		b := int64(y)
		if m > 1 || d > 1 {
			b++
		}
		return b
	}
}

// bucketTime converts a bucket back to the UTC instant at which it starts.
func bucketTime(f int, b bucket) time.Time {
	var day int64
	hour := 0
	switch f {
	case freqH:
		day = calendar.FloorDiv(b, 24)
		hour = int(b - day*24)
	case freqD:
		day = b
	case freqW:
		day = b*7 + weekEpoch
	case freqM:
		y := calendar.FloorDiv(b, 12)
		return time.Date(int(y), time.Month(b-y*12+1), 1, 0, 0, 0, 0, time.UTC)
	default:
		return time.Date(int(b), 1, 1, 0, 0, 0, 0, time.UTC)
	}
	y, m, d := civilFromDays(day)
	return time.Date(y, time.Month(m), d, hour, 0, 0, 0, time.UTC)
}

// cursor walks the periods of one series in ascending order and renders
// them as ISO text without allocating.
type cursor struct {
	f          int
	y, m, d, h int
}

func newCursor(f int, b bucket) cursor {
	t := bucketTime(f, b)
	return cursor{f: f, y: t.Year(), m: int(t.Month()), d: t.Day(), h: t.Hour()}
}

func (c *cursor) next() {
	switch c.f {
	case freqH:
		c.h++
		if c.h < 24 {
			return
		}
		c.h = 0
		c.addDays(1)
	case freqD:
		c.addDays(1)
	case freqW:
		c.addDays(7)
	case freqM:
		c.m++
		if c.m > 12 {
			c.m = 1
			c.y++
		}
	default:
		c.y++
	}
}

func (c *cursor) addDays(n int) {
	c.d += n
	if dim := daysIn(c.y, c.m); c.d > dim {
		c.d -= dim
		c.m++
		if c.m > 12 {
			c.m = 1
			c.y++
		}
	}
}

const digits2 = "00010203040506070809" +
	"10111213141516171819" +
	"20212223242526272829" +
	"30313233343536373839" +
	"40414243444546474849" +
	"50515253545556575859" +
	"60616263646566676869" +
	"70717273747576777879" +
	"80818283848586878889" +
	"90919293949596979899"

// appendPeriod renders the cursor as 2024-01-05 or 2024-01-05T13:00:00.
func (c *cursor) appendPeriod(b []byte) []byte {
	hi, lo := c.y/100, c.y%100
	b = append(b,
		digits2[2*hi], digits2[2*hi+1], digits2[2*lo], digits2[2*lo+1], '-',
		digits2[2*c.m], digits2[2*c.m+1], '-',
		digits2[2*c.d], digits2[2*c.d+1])
	if c.f == freqH {
		b = append(b, 'T', digits2[2*c.h], digits2[2*c.h+1], ':', '0', '0', ':', '0', '0')
	}
	return b
}
