package functions

import (
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
			want: Options{Headers: true, Dates: false, Transpose: true, Desc: true, Last: 7, Fill: FillPrev}},
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
		{name: "bad fill", args: []any{"fill=0"}, err: "option fill=0: want none, prev or na"},
		{name: "bad bool", args: []any{"transpose=2"}, err: "option transpose=2: want y or n"},
		{name: "bad last", args: []any{"last=-1"}, err: "option last=-1: want a whole number from 1 to 1000000000"},
		{name: "float last", args: []any{"last=2.5"}, err: "option last=2.5: want a whole number from 1 to 1000000000"},
		{name: "unknown", args: []any{"colour=red"}, err: "option colour: unknown; want per, agg, fill, order, headers, dates, transpose or last"},
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
	if AggAvg.String() != "avg" || FillPrev.String() != "prev" || Agg(99).String() != "Agg(99)" || Fill(9).String() != "Fill(9)" {
		t.Fatal("String")
	}
}
