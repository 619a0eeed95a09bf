package functions

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/energyscope/energyscope/internal/calendar"
)

// column is one series of an ES.Get while it is being assembled.
type column struct {
	id      string  // as typed
	ref     string  // as the Source knows it: id, or the one id that differs only by case
	periods []int64 // ascending; owned (the Source hands over fresh slices)
	values  []float64
	hist    int        // how many of the points are history, before the range (see transform.go)
	err     *CellError // the whole column failed: every data cell shows it
	cause   error      // err as a Go error, for Frame
}

// table is the columns of an ES.Get aligned on one date column, before layout.
type table struct {
	cols []column
	all  []int64 // the dates shown, ascending, not empty
	fill Fill    // what the layout still fills (FillNone once the transforms applied it)
}

// get is ES.Get(series, [start], [end], [options...]).
//
// Steps: read arguments; assemble the table (fetch, re-sample, look back, align,
// transform: see assemble); keep the last N (last=); check the size; lay out rows
// (order=, headers=, dates=, transpose=) in one backing slice, filling gaps (fill=).
func (e *Engine) get(args []any) (*Grid, *CellError) {
	if len(args) == 0 {
		return nil, cellErr(CodeValue, "series: missing; use ES.Get(series, [start], [end], [options...])")
	}
	maxCells := e.maxCells()
	ids, cerr := readIDs(args[0], "series", maxCells)
	if cerr != nil {
		return nil, cerr
	}
	// Up to two dates, then options; a key=value argument starts the options early.
	var dates [2]any
	rest := args[1:]
	for nd := 0; nd < 2 && len(rest) > 0 && !isOptionArg(rest[0]); nd++ {
		dates[nd], rest = rest[0], rest[1:]
	}
	opts, err := ParseOptions(rest)
	if err != nil {
		return nil, &CellError{Code: CodeValue, Message: err.Error()}
	}
	now := e.now()
	from, cerr := readDate(dates[0], "start", now, false)
	if cerr != nil {
		return nil, cerr
	}
	to, cerr := readDate(dates[1], "end", now, true)
	if cerr != nil {
		return nil, cerr
	}
	if from > to {
		return nil, cellErr(CodeValue, "start %s is after end %s", formatTime(from), formatTime(to))
	}

	tb, cerr := e.asOf(opts.AsOf).assemble(ids.ids, from, to, &opts, maxCells)
	if cerr != nil {
		return nil, cerr
	}
	cols, all := tb.cols, tb.all
	if opts.Last > 0 && len(all) > opts.Last {
		all = all[len(all)-opts.Last:]
	}
	nr, nc := len(all), len(cols) // logical rows and columns, before transpose
	h, d := opts.Headers.Count(), 0
	if opts.Dates {
		d = 1
	}
	nr += h
	nc += d
	if cells := nr * nc; cells > maxCells {
		return nil, tooLarge(cells)
	}

	// Cell (r, c) of the logical table is at index r*rs + c*cs of the grid, which is
	// nr x nc, or nc x nr when transposed.
	var g *Grid
	rs, cs := nc, 1
	if opts.Transpose {
		g = &Grid{Rows: nc, Cols: nr}
		rs, cs = 1, nr
	} else {
		g = &Grid{Rows: nr, Cols: nc}
	}
	g.Num = make([]float64, nr*nc) // every cell is written below
	num := g.Num
	// The i-th date (ascending) sits on logical row first + i*step.
	first, step := h, 1
	if opts.Desc {
		first, step = h+len(all)-1, -1
	}
	if h > 0 {
		e.headerRows(g, cols, opts.Headers, d, rs, cs)
	}
	walkRows(cols, all, tb.fill, func(i int, t int64, row []float64) bool {
		r := (first + i*step) * rs
		if d == 1 {
			num[r] = ExcelSerial(t)
		}
		for j, x := range row {
			num[r+(d+j)*cs] = x
		}
		return true
	})
	// Cells that are errors: every cell of a failed column (walkRows gave NaN), and with
	// fill=na every empty one.
	for j := range cols {
		c := &cols[j]
		cerr := c.err
		if cerr == nil && tb.fill != FillNA {
			continue
		}
		for i := range all {
			k := (first+i*step)*rs + (d+j)*cs
			if num[k] == num[k] {
				continue
			}
			if cerr == nil { // boxed once, shared by the column's cells
				cerr = cellErr(CodeNA, "no value for %s on this date", clip(c.id))
			}
			g.set(k, cerr)
		}
	}
	return g, nil
}

// headerRows writes the header rows hr asks for (ids, names, units, in that order) at
// the top of the logical table: "Date" over the date column in the first, the rest of
// that column empty.
func (e *Engine) headerRows(g *Grid, cols []column, hr HeaderRows, d, rs, cs int) {
	var infos []SeriesInfo
	if hr&(HeaderName|HeaderUnit) != 0 {
		infos = make([]SeriesInfo, len(cols))
		for j, c := range cols {
			if c.err == nil {
				infos[j], _ = e.Src.Info(c.ref)
			}
		}
	}
	r := 0
	for _, kind := range [...]HeaderRows{HeaderID, HeaderName, HeaderUnit} {
		if hr&kind == 0 {
			continue
		}
		if d == 1 {
			if r == 0 {
				g.set(0, "Date")
			} else {
				g.set(r*rs, nil)
			}
		}
		for j, c := range cols {
			v := c.id
			switch kind {
			case HeaderName:
				v = infos[j].Name
			case HeaderUnit:
				v = infos[j].Unit
			}
			g.set(r*rs+(d+j)*cs, v)
		}
		r++
	}
}

// lastBucketBefore is the start of the last bucket that starts at or before t.
func lastBucketBefore(t int64, per byte) int64 {
	s, _ := calendar.Frequency(per).Bucket(t)
	if s > t {
		s = calendar.Frequency(per).Prev(s)
	}
	return s
}

// assemble fetches the series and aligns them on one date column: the points in
// [from, to], re-sampled (per=, agg=, days=), with the history before from that
// changes, moving averages and fill=prev need (see transform.go); aligned on the union
// of their dates or, with days=, on every bucket of the calendar from the start (or the
// first point, if later) to the end (not past today) or, if the end is open, the last
// point; transformed; history cut off. limit bounds the cells (dates x (series + 1))
// of a calendar, and 16 x limit those of the filled rows the transforms work on.
// It fails only if every series failed, none has a point in the range, or the calendar
// is too long; the table then holds the columns, with their errors, and no dates.
func (e *Engine) assemble(ids []string, from, to int64, opts *Options, limit int) (table, *CellError) {
	per := opts.Per
	if per == 'D' && opts.Days == DaysWeekdays {
		per = 'B'
	}
	cut := from
	if per != 0 && from > MinTime {
		cut, _ = calendar.Frequency(per).Bucket(from)
	}
	lb := needs(opts)
	budget := SuggestPerCall
	cols := make([]column, len(ids))
	live := 0 // columns with at least one point in the range
	for j, id := range ids {
		c := &cols[j]
		c.id = id
		c.ref, c.periods, c.values, c.err, c.cause = e.fetch(id, from, to, &budget)
		if c.err != nil {
			continue
		}
		if per != 0 {
			c.periods, c.values = resample(c.periods, c.values, per, opts.Agg)
		}
		inRange := len(c.periods) > 0
		if lb.any() {
			e.history(c, from, cut, per, opts.Agg, lb)
		}
		// On a calendar, a value carried from before the start fills the range too.
		if inRange || (opts.Days != DaysAsStored && opts.Fill == FillPrev && c.hist > 0) {
			live++
		}
	}
	if live == 0 {
		var ok []string
		for _, c := range cols {
			if c.err == nil {
				ok = append(ok, c.id)
			}
		}
		if len(ok) == 0 {
			return table{cols: cols}, cols[0].err
		}
		return table{cols: cols}, noData(strings.Join(ok, ","), from, to)
	}
	tb := table{cols: cols, fill: opts.Fill}
	transforms := opts.transforms()
	aligned := transforms && (opts.Fill == FillPrev || opts.Fill == FillZero)
	if transforms && !aligned {
		for j := range cols {
			if c := &cols[j]; c.err == nil {
				transform(c.periods, c.values, opts, cut)
				c.periods, c.values, c.hist = c.periods[c.hist:], c.values[c.hist:], 0
			}
		}
	}

	var all []int64
	if opts.Days != DaysAsStored {
		// From the start (or the first point, if later) to the end (or the last point,
		// if later; never past today) or, for an open end, to the last point.
		end, earliest := int64(math.MinInt64), int64(math.MaxInt64)
		for _, c := range cols {
			if c.hist < len(c.periods) {
				end = max(end, c.periods[len(c.periods)-1])
			}
			if len(c.periods) > 0 {
				earliest = min(earliest, c.periods[0])
			}
		}
		start := max(cut, earliest)
		if to < MaxTime {
			end = max(end, lastBucketBefore(min(to, e.now().Unix()), per))
		}
		if end < start {
			return table{cols: cols}, noData(strings.Join(ids, ","), from, to)
		}
		// Checked before the calendar is built: rows x (columns + dates) within limit.
		n, perRow := calendar.Frequency(per).Count(start, end), int64(len(cols)+1)
		if n*perRow > int64(limit) && opts.Last > 0 && int64(opts.Last)*perRow <= int64(limit) {
			start, n = end, 1 // only the last ones are shown
			for ; n < int64(opts.Last); n++ {
				start = calendar.Frequency(per).Prev(start)
			}
		}
		if n*perRow > int64(limit) {
			return table{cols: cols}, tooLarge(int(min(n*perRow, math.MaxInt32)))
		}
		first := start
		if aligned { // rows before the range for the transforms to look back over
			if lb.year {
				first, _ = calendar.Frequency(per).Bucket(yearBefore(start) - week)
			}
			for i := 0; i <= lb.points; i++ {
				first = calendar.Frequency(per).Prev(first)
			}
			first = max(first, earliest)
		}
		all, _ = calendarDates(first, end, per, int(calendar.Frequency(per).Count(first, end)))
		cut = max(cut, start)
	} else {
		all = unionDates(cols)
	}
	if aligned {
		// The filled rows are built whole before last= and the size check of the
		// layout: bound them too (generously: history rows and last= make them more
		// than are shown).
		if cells := int64(len(all)) * int64(len(cols)+1); cells > 16*int64(limit) {
			return table{cols: cols}, tooLarge(int(min(cells, math.MaxInt32)))
		}
		dense := make([][]float64, len(cols))
		for j := range dense {
			dense[j] = make([]float64, len(all))
		}
		walkRows(cols, all, opts.Fill, func(i int, _ int64, row []float64) bool {
			for j, x := range row {
				dense[j][i] = x
			}
			return true
		})
		k, _ := slices.BinarySearch(all, cut)
		for j := range cols {
			c := &cols[j]
			if c.err != nil {
				continue
			}
			transform(all, dense[j], opts, cut)
			c.periods, c.values, c.hist = all[k:], dense[j][k:], 0
		}
		tb.fill = FillNone
		all = all[k:]
	} else if k, _ := slices.BinarySearch(all, cut); k > 0 {
		all = all[k:]
	}
	tb.all = all
	return tb, nil
}

// fetch reads one series and checks what the Source returned. An id the Source does not
// have is retried as the one id that differs from it only by case, if there is one
// (ref is then that id); otherwise the error names the nearest ids. cause is the error
// as Frame reports it. budget is the call's SuggestPerCall.
func (e *Engine) fetch(id string, from, to int64, budget *int) (ref string, p []int64, v []float64, cerr *CellError, cause error) {
	ref = id
	p, v, err := e.Src.Get(id, from, to)
	if errors.Is(err, ErrNotFound) {
		r, near := resolve(e.Src, id, spend(budget))
		if r != "" {
			if p2, v2, err2 := e.Src.Get(r, from, to); err2 == nil {
				ref, p, v, err = r, p2, v2, nil
			}
		}
		if err != nil {
			err = &notFoundError{id: id, near: near}
		}
	}
	fail := func(format string, args ...any) (string, []int64, []float64, *CellError, error) {
		ce := cellErr(CodeNA, "%s: "+format, append([]any{clip(id)}, args...)...)
		return ref, nil, nil, ce, fmt.Errorf("series %q: "+format, append([]any{clip(id)}, args...)...)
	}
	switch {
	case errors.Is(err, ErrNotFound):
		return ref, nil, nil, cellErr(CodeNA, "%v", err), err
	case err != nil:
		ce := cellErr(CodeNA, "%s: %v", clip(id), err)
		return ref, nil, nil, ce, fmt.Errorf("series %q: %w", clip(id), err)
	case len(p) != len(v):
		return fail("source returned %d dates and %d values", len(p), len(v))
	}
	for i := 1; i < len(p); i++ {
		if p[i] < p[i-1] {
			return fail("source returned dates out of order")
		}
	}
	return ref, p, v, nil, nil
}

func notFound(id string) *CellError { return cellErr(CodeNA, "series %q not found", clip(id)) }

func noData(ids string, from, to int64) *CellError {
	ids = clip(ids)
	switch {
	case from == MinTime && to == MaxTime:
		return cellErr(CodeNA, "no data for %s", ids)
	case from == MinTime:
		return cellErr(CodeNA, "no data for %s on or before %s", ids, formatTime(to))
	case to == MaxTime:
		return cellErr(CodeNA, "no data for %s on or after %s", ids, formatTime(from))
	}
	return cellErr(CodeNA, "no data for %s between %s and %s", ids, formatTime(from), formatTime(to))
}

// walkRows calls fn for each date of all (ascending, not empty), oldest first, with the
// columns' values on that date: row[j] is column j's, NaN where it has none (no point, a
// NaN or infinite value, or a failed column). With FillPrev a missing value repeats the
// column's last one, starting from the last before all[0] (history, or a point last=
// cut off); with FillZero it is 0 (but a failed column's stays NaN).
// Of repeated dates in a column the first counts. row is reused between calls; the walk
// stops when fn returns false.
func walkRows(cols []column, all []int64, fill Fill, fn func(i int, t int64, row []float64) bool) {
	n := len(cols)
	k := make([]int, n)
	prev := make([]float64, n)
	row := make([]float64, n)
	for j, c := range cols {
		k[j], _ = slices.BinarySearch(c.periods, all[0])
		prev[j] = math.NaN()
		if fill == FillPrev {
			for b := k[j] - 1; b >= 0; b-- {
				if finiteValue(c.values[b]) {
					prev[j] = c.values[b]
					break
				}
			}
		}
	}
	for i, t := range all {
		for j := range cols {
			p, v := cols[j].periods, cols[j].values
			kk := k[j]
			for kk < len(p) && p[kk] < t {
				kk++
			}
			x := math.NaN()
			if kk < len(p) && p[kk] == t {
				if finiteValue(v[kk]) {
					x = v[kk]
				}
				kk++
			}
			k[j] = kk
			if x == x {
				prev[j] = x
			} else if fill == FillPrev {
				x = prev[j]
			} else if fill == FillZero && cols[j].err == nil {
				x = 0
			}
			row[j] = x
		}
		if !fn(i, t, row) {
			return
		}
	}
}

func finiteValue(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// unionDates merges the columns' dates into one ascending list without repeats. With one
// live column it is that column's slice. A few columns merge by scanning their heads; many
// are sorted together, which bounds the work by n log n rather than n x columns.
func unionDates(cols []column) []int64 {
	total, live, last := 0, 0, -1
	for j, c := range cols {
		if len(c.periods) > 0 {
			total += len(c.periods)
			live++
			last = j
		}
	}
	if live == 1 {
		return dedupe(cols[last].periods)
	}
	out := make([]int64, 0, total)
	if live > 8 {
		for _, c := range cols {
			out = append(out, c.periods...)
		}
		slices.Sort(out)
		return slices.Compact(out)
	}
	cur := make([]int, len(cols))
	for {
		var m int64 = math.MaxInt64
		found := false
		for j, c := range cols {
			if cur[j] < len(c.periods) && c.periods[cur[j]] <= m {
				m, found = c.periods[cur[j]], true
			}
		}
		if !found {
			return out
		}
		out = append(out, m)
		for j, c := range cols {
			for cur[j] < len(c.periods) && c.periods[cur[j]] == m {
				cur[j]++
			}
		}
	}
}

// dedupe returns ascending p without repeated dates, copying only if it has any.
func dedupe(p []int64) []int64 {
	for i := 1; i < len(p); i++ {
		if p[i] == p[i-1] {
			return slices.Compact(slices.Clone(p))
		}
	}
	return p
}

// resample reduces ascending points to one per bucket, in place, dated at the bucket's
// start. NaN and infinite values are skipped; a bucket with none left is NaN (empty).
func resample(p []int64, v []float64, per byte, agg Agg) ([]int64, []float64) {
	w := 0
	for i := 0; i < len(p); {
		start, next := calendar.Frequency(per).Bucket(p[i])
		var acc float64
		n := 0
		// The first point always belongs to its bucket: progress even if next overflowed.
		j := i
		for {
			x := v[j]
			j++
			if !math.IsNaN(x) && !math.IsInf(x, 0) {
				switch agg {
				case AggLast:
					acc = x
				case AggFirst:
					if n == 0 {
						acc = x
					}
				case AggAvg, AggSum:
					acc += x
				case AggMin:
					if n == 0 || x < acc {
						acc = x
					}
				case AggMax:
					if n == 0 || x > acc {
						acc = x
					}
				}
				n++
			}
			if j >= len(p) || p[j] >= next {
				break
			}
		}
		i = j
		switch {
		case n == 0:
			acc = math.NaN()
		case agg == AggAvg:
			acc /= float64(n)
		}
		p[w], v[w] = start, acc
		w++
	}
	return p[:w], v[:w]
}
