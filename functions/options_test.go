package functions

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

func TestParseOptions(t *testing.T) {
	def := DefaultOptions()
	with := func(f func(*Options)) Options { o := DefaultOptions(); f(&o); return o }
	for _, c := range []struct {
		name string
		args []any
		want Options
		err  string
	}{
		{name: "none", args: nil, want: def},
		{name: "blank", args: []any{"", "  ", nil, ";,"}, want: def},
		{name: "per", args: []any{"per=m"}, want: with(func(o *Options) { o.Per = 'M' })},
		{name: "per words", args: []any{"period=Quarterly"}, want: with(func(o *Options) { o.Per = 'Q' })},
		{name: "per y", args: []any{"per=Y"}, want: with(func(o *Options) { o.Per = 'A' })},
		{name: "semicolons", args: []any{"per=W;agg=max"}, want: with(func(o *Options) { o.Per, o.Agg = 'W', AggMax })},
		{name: "spaces around =", args: []any{"per = d ,  agg =  avg"}, want: with(func(o *Options) { o.Per, o.Agg = 'D', AggAvg })},
		{name: "spaces separate", args: []any{"PER=A AGG=Sum\tlast=3"}, want: with(func(o *Options) { o.Per, o.Agg, o.Last = 'A', AggSum, 3 })},
		{name: "everything", args: []any{"headers=yes dates=0 transpose=on order=DESC last=7 fill=prev"},
			want: Options{Headers: HeaderID, Dates: false, Transpose: true, Desc: true, Last: 7, Fill: FillPrev}},
		{name: "fill na", args: []any{"fill=N/A"}, want: with(func(o *Options) { o.Fill = FillNA })},
		{name: "later wins", args: []any{"order=desc", "order=asc", "dates=n", "dates=y"}, want: def},
		{name: "range", args: []any{[][]any{{"per=Q", nil}, {"agg=first", ""}}}, want: with(func(o *Options) { o.Per, o.Agg = 'Q', AggFirst })},
		{name: "json row", args: []any{[]any{"last=3", nil}}, want: with(func(o *Options) { o.Last = 3 })},
		{name: "no =", args: []any{"per"}, err: `option "per": want key=value, e.g. per=M`},
		{name: "no key", args: []any{"=M"}, err: `option "=M": want key=value, e.g. per=M`},
		{name: "empty value", args: []any{"per="}, err: "option per=: want D, W, M, Q or A"},
		{name: "double =", args: []any{"per=M=Q"}, err: "option per=M=Q: want D, W, M, Q or A"},
		{name: "bad per", args: []any{"per=X"}, err: "option per=X: want D, W, M, Q or A"},
		{name: "bad agg", args: []any{"per=M", "agg=median"}, err: "option agg=median: want last, first, avg, sum, min or max"},
		{name: "agg without per", args: []any{"agg=max"}, err: "option agg=max: needs per=D, W, M, Q or A"},
		{name: "bad fill", args: []any{"fill=1"}, err: "option fill=1: want none, prev, na or zero"},
		{name: "fill zero", args: []any{"fill=zero"}, want: with(func(o *Options) { o.Fill = FillZero })},
		{name: "transforms", args: []any{"chg=PCT yoy=diff ma=12 rebase=100 scale=-0.5"},
			want: with(func(o *Options) {
				o.Chg, o.YoY, o.MA, o.Rebase, o.HasRebase, o.Scale, o.HasScale = ChangePct, ChangeDiff, 12, 100, true, -0.5, true
			})},
		{name: "chg log", args: []any{"change=log"}, want: with(func(o *Options) { o.Chg = ChangeLog })},
		{name: "ma=1 is no ma", args: []any{"ma=1"}, want: def},
		{name: "days alone is per=D", args: []any{"days=weekdays"}, want: with(func(o *Options) { o.Per, o.Days = 'D', DaysWeekdays })},
		{name: "days with per", args: []any{"days=all;per=W"}, want: with(func(o *Options) { o.Per, o.Days = 'W', DaysAll })},
		{name: "headers all", args: []any{"headers=all"}, want: with(func(o *Options) { o.Headers = HeaderAll })},
		{name: "headers name+unit", args: []any{"headers=Name+unit"}, want: with(func(o *Options) { o.Headers = HeaderName | HeaderUnit })},
		{name: "headers y is id", args: []any{"headers=y"}, want: with(func(o *Options) { o.Headers = HeaderID })},
		{name: "bad headers", args: []any{"headers=colour"}, err: "option headers=colour: want id, name, unit, all (or several joined by +), y or n"},
		{name: "bad chg", args: []any{"chg=ratio"}, err: "option chg=ratio: want diff, pct or log"},
		{name: "bad yoy", args: []any{"yoy=log"}, err: "option yoy=log: want diff or pct"},
		{name: "bad ma", args: []any{"ma=0"}, err: "option ma=0: want a whole number from 1 to 10000"},
		{name: "big ma", args: []any{"ma=10001"}, err: "option ma=10001: want a whole number from 1 to 10000"},
		{name: "bad rebase", args: []any{"rebase=0"}, err: "option rebase=0: want a number other than 0, e.g. 100"},
		{name: "nan scale", args: []any{"scale=NaN"}, err: "option scale=NaN: want a number, e.g. 0.001"},
		{name: "inf scale", args: []any{"scale=1e999"}, err: "option scale=1e999: want a number, e.g. 0.001"},
		{name: "bad days", args: []any{"days=some"}, err: "option days=some: want all or weekdays"},
		{name: "bad bool", args: []any{"transpose=2"}, err: "option transpose=2: want y or n"},
		{name: "bad last", args: []any{"last=-1"}, err: "option last=-1: want a whole number from 1 to 1000000000"},
		{name: "float last", args: []any{"last=2.5"}, err: "option last=2.5: want a whole number from 1 to 1000000000"},
		{name: "unknown", args: []any{"colour=red"}, err: "option colour: unknown; want per, agg, days, fill, chg, yoy, ma, rebase, scale, order, headers, dates, transpose, last or asof"},
		{name: "typo", args: []any{"fil=prev"}, err: "option fil: unknown; did you mean fill?; want per, agg, days, fill, chg, yoy, ma, rebase, scale, order, headers, dates, transpose, last or asof"},
		{name: "bool arg", args: []any{true}, err: "option TRUE: want key=value text"},
		{name: "number in range", args: []any{[][]any{{"per=M", 3.0}}}, err: "option 3: want key=value text"},
		{name: "range in range", args: []any{[][]any{{[][]any{{"per=M"}}}}}, err: "option a range inside a range: want key=value text"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseOptions(c.args)
			if c.err != "" {
				if err == nil || err.Error() != c.err {
					t.Fatalf("got %+v, %v; want error %s", got, err, c.err)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, c.want)
			}
		})
	}
}

func TestAggFillString(t *testing.T) {
	for _, c := range []struct {
		got  fmt.Stringer
		want string
	}{
		{AggAvg, "avg"}, {AggLast, "last"}, {AggMax, "max"}, {Agg(99), "Agg(99)"},
		{FillPrev, "prev"}, {FillZero, "zero"}, {Fill(9), "Fill(9)"},
		{ChangeNone, "none"}, {ChangeLog, "log"}, {Change(4), "Change(4)"},
		{DaysAsStored, "stored"}, {DaysWeekdays, "weekdays"}, {Days(3), "Days(3)"},
		{AsOfTime, "time"}, {AsOfTag, "tag"}, {AsOfKind(0), "AsOfKind(0)"}, {AsOfKind(6), "AsOfKind(6)"},
	} {
		if s := c.got.String(); s != c.want {
			t.Errorf("%T %d: %q, want %q", c.got, c.got, s, c.want)
		}
	}
}

// TestOptionAliases: an option named by an alias takes the same words as
// its canonical key, and a word it does not take is refused naming the
// canonical key and the words it wants.
func TestOptionAliases(t *testing.T) {
	for _, c := range []struct{ alias, key, word, want string }{
		{"period", "per", "monthly", "D, W, M, Q or A"}, {"aggregate", "agg", "mean", "last, first, avg, sum, min or max"},
		{"calendar", "days", "business", "all or weekdays"}, {"change", "chg", "%", "diff, pct or log"},
		{"sort", "order", "descending", "asc or desc"}, {"fill", "fill", "n/a", "none, prev, na or zero"},
		{"yoy", "yoy", "pct", "diff or pct"},
	} {
		with := "" // agg= needs a per=
		if c.key == "agg" {
			with = "per=M;"
		}
		a, errA := ParseOptions([]any{with + c.alias + "=" + c.word})
		k, errK := ParseOptions([]any{with + c.key + "=" + strings.ToUpper(c.word)})
		if errA != nil || errK != nil || !reflect.DeepEqual(a, k) || reflect.DeepEqual(a, DefaultOptions()) {
			t.Errorf("%s=%s: %+v %v; %s: %+v %v", c.alias, c.word, a, errA, c.key, k, errK)
		}
		_, err := ParseOptions([]any{c.alias + "=nope"})
		if want := "option " + c.key + "=nope: want " + c.want; err == nil || err.Error() != want {
			t.Errorf("%s=nope: %v, want %q", c.alias, err, want)
		}
	}
}
