package functions

import (
	"encoding/binary"
	"math"
	"testing"
	"time"
)

func FuzzParseDate(f *testing.F) {
	for _, c := range dateCases() {
		f.Add(c.in)
	}
	f.Fuzz(func(t *testing.T, s string) {
		start, errS := ParseDate(s, dateNow, false)
		end, errE := ParseDate(s, dateNow, true)
		if (errS == nil) != (errE == nil) {
			t.Fatalf("%q: start error %v, end error %v", s, errS, errE)
		}
		if errS != nil {
			return
		}
		if start < MinTime || end > MaxTime || start > end {
			t.Fatalf("%q: start %d end %d", s, start, end)
		}
	})
}

func FuzzParseOptions(f *testing.F) {
	for _, s := range []string{"per=M", "per = w , agg = max", "headers=y dates=n transpose=y order=desc last=3 fill=prev", "=", " = ; ,", "last=99999999999999999999", "per=A;agg=sum",
		"chg=pct yoy=diff ma=12 rebase=100 scale=0.001", "days=weekdays fill=prev", "headers=id+unit", "fill=zero;chg=log", "ma=1", "rebase=0", "scale=1e400",
		"asof=2026-10-01", "asof=2026-13-01", "asof=e1-s2-0123456789ab;per=M", "asof=q3-close"} {
		f.Add(s, "")
	}
	f.Fuzz(func(t *testing.T, s, cell string) {
		o, err := ParseOptions([]any{s, [][]any{{cell, nil}}})
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error")
			}
			return
		}
		switch o.Per {
		case 0, 'D', 'W', 'M', 'Q', 'A':
		default:
			t.Fatalf("Per %q", o.Per)
		}
		if o.Agg > AggMax || o.Fill > FillZero || o.Last < 0 || o.Last > MaxLast ||
			o.Chg > ChangeLog || o.YoY > ChangePct || o.MA < 0 || o.MA == 1 || o.MA > MaxMA ||
			o.Days > DaysWeekdays || (o.Days != DaysAsStored && o.Per == 0) || o.Headers > HeaderAll ||
			(o.HasRebase && (o.Rebase == 0 || !finiteValue(o.Rebase))) || (o.HasScale && !finiteValue(o.Scale)) {
			t.Fatalf("options %+v", o)
		}
	})
}

// argDecoder turns fuzz bytes into Excel-like arguments of mixed types.
type argDecoder struct{ b []byte }

func (d *argDecoder) next() byte {
	if len(d.b) == 0 {
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

var fuzzStrings = []string{
	"MSFT", "IBM,GOOG", "MSFT,NOPE", "Renewables", "SEA.WIND", "", " ", "NOPE",
	"2000", "2004-06", "2000-01-01", "2010-01-07T22:00", "today", "-6M", "+1Y", "ytd", "99999-01-01",
	"per=A", "per=W;agg=avg", "fill=prev", "fill=na", "order=desc", "headers=y", "dates=n",
	"transpose=y", "last=3", "last=1000000000", "value", "date", "both", "name", "first", "updated",
	"chg=pct", "chg=log;fill=prev", "yoy=diff", "ma=3", "ma=10000", "rebase=100;scale=-2", "days=weekdays;fill=prev",
	"days=all;per=W;chg=diff", "fill=zero", "headers=all", "msft", "MSTF", "ibm,Gogl", "2000Q1", "36526", "-10D",
	"asof=2010-01-02", "asof=e1-s10-0123456789ab", "asof=2009-01-01T00:00:00Z;per=A", "asof=bad one", "asof=2026-13-01",
}

var fuzzNumbers = []float64{0, 1, 60, 2000, 20000101, 36526, 40185.5, 2958465, 2958466, -1, 1e300, math.NaN(), math.Inf(1), 3, 1000}

func (d *argDecoder) value(depth int) any {
	switch d.next() % 9 {
	case 0:
		return nil
	case 1:
		return d.next()%2 == 0
	case 2:
		var buf [8]byte
		for i := range buf {
			buf[i] = d.next()
		}
		return math.Float64frombits(binary.LittleEndian.Uint64(buf[:]))
	case 3:
		return fuzzNumbers[int(d.next())%len(fuzzNumbers)]
	case 4, 5:
		return fuzzStrings[int(d.next())%len(fuzzStrings)]
	case 6:
		n := int(d.next() % 24)
		n = min(n, len(d.b))
		s := string(d.b[:n])
		d.b = d.b[n:]
		return s
	case 7:
		if depth > 0 {
			return rangeInRange{}
		}
		r, c := int(d.next()%4), int(d.next()%4)
		v := make([][]any, r)
		for i := range v {
			v[i] = make([]any, c)
			for j := range v[i] {
				v[i][j] = d.value(depth + 1)
			}
		}
		return v
	default:
		if depth > 1 {
			return 7
		}
		n := int(d.next() % 4)
		v := make([]any, n)
		for i := range v {
			v[i] = d.value(depth + 1)
		}
		return v
	}
}

var fuzzFns = []string{"ES.Get", "get", "ES.Latest", "ES.Info", "ES.Search", "ES.Live", "es.GET", "ES.Nope", "", "ES.Revisions"}

func FuzzCall(f *testing.F) {
	e, _ := newVintageEngine(f) // a VintageSource: asof= and ES.Revisions reach it
	e.MaxCells = 300
	f.Add([]byte{0, 4, 0, 4, 8, 4, 17})
	f.Add([]byte{0, 4, 1, 3, 5, 5, 18, 4, 23})
	f.Add([]byte{2, 4, 0, 4, 31})
	f.Add([]byte{3, 7, 2, 1, 4, 0, 4, 7})
	f.Add([]byte{4, 4, 0})
	f.Add([]byte{0, 8, 2, 4, 1, 4, 2, 3, 5})
	f.Fuzz(func(t *testing.T, data []byte) {
		d := &argDecoder{b: data}
		fn := fuzzFns[int(d.next())%len(fuzzFns)]
		n := int(d.next() % 6)
		args := make([]any, n)
		for i := range args {
			args[i] = d.value(0)
		}
		start := time.Now()
		r := e.Call(fn, args)
		checkShape(t, r, e.MaxCells)
		if time.Since(start) > time.Second {
			t.Fatalf("slow call %s %v", fn, args)
		}
	})
}
