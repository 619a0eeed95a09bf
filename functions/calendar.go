package functions

import "github.com/energyscope/energyscope/internal/calendar"

// Calendar steps on unix seconds, UTC, over internal/calendar's day arithmetic: the
// per-point paths (bucketing, serials) use these instead of time.Time. The buckets of
// per= are internal/calendar's too: calendar.Frequency(per) with per one of 'D', 'B' (a
// weekday: Saturday and Sunday belong to the Monday after), 'W' (weeks start Monday), 'M',
// 'Q' or 'A', and its Bucket, Next, Prev and Count.

const secondsPerDay = calendar.SecondsPerDay

// yearBefore is t moved back one year, the day clamped to the month's end (2024-02-29
// gives 2023-02-28), the time of day kept.
func yearBefore(t int64) int64 {
	day := calendar.FloorDiv(t, secondsPerDay)
	sec := t - day*secondsPerDay
	y, m, d := calendar.CivilFromDays(day)
	return calendar.DaysFromCivil(calendar.AddMonths(y, m, d, -12))*secondsPerDay + sec
}
