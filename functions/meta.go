package functions

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"time"
)

// lookup asks the Source for one series' description.
func (e *Engine) lookup(id string, budget *int) (SeriesInfo, *CellError) {
	info, _, err := seek(e.Src, id, budget, e.Src.Info)
	switch {
	case errors.Is(err, ErrNotFound):
		return info, cellErr(CodeNA, "%v", err)
	case err != nil:
		return info, cellErr(CodeNA, "%s: %v", clip(id), err)
	}
	return info, nil
}

// latest is ES.Latest(series, [field]) with field value (default), date or both.
func (e *Engine) latest(args []any) (*Grid, *CellError) {
	if len(args) > 2 {
		return nil, tooMany(args, 2, "ES.Latest", "series, field")
	}
	if len(args) == 0 {
		return nil, cellErr(CodeValue, "series: missing; use ES.Latest(series, [field])")
	}
	ids, cerr := readIDs(args[0], "series", e.maxCells())
	if cerr != nil {
		return nil, cerr
	}
	field := "value"
	if len(args) == 2 {
		w, cerr := readWord(args[1], "field")
		if cerr != nil {
			return nil, cerr
		}
		switch w {
		case "":
		case "value", "date", "both":
			field = w
		default:
			return nil, cellErr(CodeValue, "field: want value, date or both, got %s", describe(args[1]))
		}
	}
	return e.latestCells(ids, field)
}

// live is ES.Live(series): the latest value; the bridge streams updates.
func (e *Engine) live(args []any) (*Grid, *CellError) {
	if len(args) > 1 {
		return nil, tooMany(args, 1, "ES.Live", "series")
	}
	if len(args) == 0 {
		return nil, cellErr(CodeValue, "series: missing; use ES.Live(series)")
	}
	ids, cerr := readIDs(args[0], "series", e.maxCells())
	if cerr != nil {
		return nil, cerr
	}
	return e.latestCells(ids, "value")
}

// latestCells answers ES.Latest for each id. value and date keep the shape of the
// series argument (a row of ids gives a row); both gives a [date, value] row per id.
// A failed id shows its error in its cells; if every id fails, the call fails.
func (e *Engine) latestCells(ids idList, field string) (*Grid, *CellError) {
	n := len(ids.ids)
	var (
		info1 [1]SeriesInfo // one id, the common case: no allocation
		err1  [1]*CellError
		infos = info1[:]
		errs  = err1[:]
		fails int
	)
	if n > 1 {
		infos = make([]SeriesInfo, n)
		errs = make([]*CellError, n)
	}
	budget := SuggestPerCall
	for k, id := range ids.ids {
		info, cerr := e.lookup(id, &budget)
		if cerr == nil && info.Count == 0 {
			cerr = noData(id, MinTime, MaxTime)
		}
		if cerr != nil {
			errs[k] = cerr
			fails++
			continue
		}
		infos[k] = info
	}
	if fails == n {
		return nil, errs[0]
	}
	// put writes id k's date (field date) or value (otherwise) at index i.
	put := func(g *Grid, i, k int, field string) {
		switch {
		case errs[k] != nil:
			g.set(i, errs[k])
		case field == "date":
			g.setNum(i, ExcelSerial(infos[k].Last))
		default:
			g.setNum(i, infos[k].LatestValue)
		}
	}
	if field == "both" {
		g := newGrid(n, 2)
		for k := range n {
			put(g, 2*k, k, "date")
			put(g, 2*k+1, k, "value")
		}
		return g, nil
	}
	g := newGrid(ids.rows, ids.cols)
	if ids.pos == nil {
		for k := range n {
			put(g, k, k, field)
		}
		return g, nil
	}
	for i, k := range ids.pos {
		if k >= 0 {
			put(g, i, k, field)
		}
	}
	return g, nil
}

// infoFields are ES.Info's fields in the order of its table.
var infoFields = [...]string{"id", "dataset", "name", "unit", "frequency", "source", "first", "last", "count", "latest", "updated"}

const infoFieldList = "id, dataset, name, unit, frequency, source, first, last, count, latest or updated"

// infoField is one field of info as a cell; dates are serials, unknown ones empty.
// updated is shown as wall-clock time in loc (the user's, from Engine.Now): it is a
// moment, not a period, and Excel serials carry no zone.
func infoField(info SeriesInfo, field string, loc *time.Location) any {
	switch field {
	case "id":
		return info.ID
	case "dataset":
		return info.Dataset
	case "name":
		return info.Name
	case "unit":
		return info.Unit
	case "frequency":
		return info.Frequency
	case "source":
		return info.Source
	case "count":
		return float64(info.Count)
	case "updated":
		if info.Updated.IsZero() {
			return nil
		}
		u := info.Updated.In(loc)
		_, off := u.Zone()
		return ExcelSerial(u.Unix() + int64(off))
	}
	if info.Count == 0 { // first, last and latest mean nothing without points
		return nil
	}
	switch field {
	case "first":
		return ExcelSerial(info.First)
	case "last":
		return ExcelSerial(info.Last)
	case "latest":
		if finiteValue(info.LatestValue) {
			return info.LatestValue
		}
		return nil
	}
	return nil
}

// info is ES.Info(series, [field]). With a field, one cell per id in the shape of the
// series argument; without, a table: a label column, then a column per id.
func (e *Engine) info(args []any) (*Grid, *CellError) {
	if len(args) > 2 {
		return nil, tooMany(args, 2, "ES.Info", "series, field")
	}
	if len(args) == 0 {
		return nil, cellErr(CodeValue, "series: missing; use ES.Info(series, [field])")
	}
	ids, cerr := readIDs(args[0], "series", e.maxCells())
	if cerr != nil {
		return nil, cerr
	}
	field := ""
	if len(args) == 2 {
		if field, cerr = readWord(args[1], "field"); cerr != nil {
			return nil, cerr
		}
		switch field {
		case "freq":
			field = "frequency"
		case "value":
			field = "latest"
		}
		if field != "" && !isInfoField(field) {
			return nil, cellErr(CodeValue, "field: want %s, got %s", infoFieldList, describe(args[1]))
		}
	}
	loc := e.now().Location()
	n := len(ids.ids)
	infos := make([]SeriesInfo, n)
	errs := make([]*CellError, n)
	fails := 0
	budget := SuggestPerCall
	for k, id := range ids.ids {
		if infos[k], errs[k] = e.lookup(id, &budget); errs[k] != nil {
			fails++
		}
	}
	if fails == n {
		return nil, errs[0]
	}
	if field != "" {
		cells := make([]any, n)
		for k := range n {
			if errs[k] != nil {
				cells[k] = errs[k]
			} else {
				cells[k] = infoField(infos[k], field, loc)
			}
		}
		return shaped(ids, cells), nil
	}
	if (n+1)*len(infoFields) > e.maxCells() {
		return nil, tooLarge((n + 1) * len(infoFields))
	}
	g := newGrid(len(infoFields), n+1)
	for r, f := range infoFields {
		g.set(r*g.Cols, f)
		for k := range n {
			if errs[k] != nil {
				g.set(r*g.Cols+k+1, errs[k])
			} else {
				g.set(r*g.Cols+k+1, infoField(infos[k], f, loc))
			}
		}
	}
	return g, nil
}

func isInfoField(f string) bool {
	for _, g := range infoFields {
		if f == g {
			return true
		}
	}
	return false
}

// search is ES.Search(query, [limit]): rows [id, name] in the Source's order.
func (e *Engine) search(args []any) (*Grid, *CellError) {
	if len(args) > 2 {
		return nil, tooMany(args, 2, "ES.Search", "query, limit")
	}
	if len(args) == 0 {
		return nil, cellErr(CodeValue, "query: missing; use ES.Search(query, [limit])")
	}
	var q string
	switch v := single(args[0]).(type) {
	case string:
		q = strings.TrimSpace(v)
	case float64:
		q = strconv.FormatFloat(v, 'f', -1, 64)
	case nil:
	default:
		return nil, cellErr(CodeValue, "query: want text, got %s", describe(v))
	}
	if q == "" {
		return nil, cellErr(CodeValue, "query: empty; want words to search for")
	}
	limit := DefaultSearch
	if len(args) == 2 {
		var ok bool
		if limit, ok = readLimit(single(args[1])); !ok {
			return nil, cellErr(CodeValue, "limit: want a whole number from 1 to %d, got %s", MaxSearch, describe(args[1]))
		}
	}
	res, err := e.Src.Search(q, limit)
	if err != nil {
		return nil, cellErr(CodeNA, "search %q: %v", clip(q), err)
	}
	if len(res) == 0 {
		return nil, cellErr(CodeNA, "no series match %q", clip(q))
	}
	res = res[:min(len(res), limit)]
	g := newGrid(len(res), 2)
	for i, s := range res {
		g.set(2*i, s.ID)
		g.set(2*i+1, s.Name)
	}
	return g, nil
}

func readLimit(a any) (int, bool) {
	switch v := a.(type) {
	case nil:
		return DefaultSearch, true
	case float64:
		if v != math.Trunc(v) || v < 1 || v > MaxSearch {
			return 0, false
		}
		return int(v), true
	case string:
		n, err := strconv.Atoi(strings.TrimSpace(v))
		return n, err == nil && n >= 1 && n <= MaxSearch
	}
	return 0, false
}
