package server

import (
	"bytes"
	"cmp"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/server/cook"
)

// RowColumns names the columns of update rows.
type RowColumns struct {
	Series, Period, Value string // defaults series_id, period, value
}

func (c RowColumns) withDefaults() RowColumns {
	c.Series = cmp.Or(c.Series, cook.DefaultSeriesCol)
	c.Period = cmp.Or(c.Period, cook.DefaultPeriodCol)
	c.Value = cmp.Or(c.Value, cook.DefaultValueCol)
	return c
}

// MaxIngestRows bounds one ingest request.
const MaxIngestRows = 1_000_000

// MaxIngestBytes bounds the bytes one ingest request may send (the HTTP
// layer may set a lower limit); ParseRowsArrow holds a stream's bytes in
// memory up to this size before it decodes them.
const MaxIngestBytes = 256 << 20

// ErrNoFrequency is wrapped (with ErrBadInput) by Server.Ingest's refusal of
// a new series whose frequency is neither given nor inferable.
var ErrNoFrequency = errors.New("frequency unknown")

// The three ingest formats (CSV, JSON, Arrow stream) accept the same rows
// and refuse the same bad ones, with the same reasons, through one
// rowBuilder: an empty or invalid series id (format.ValidSeriesID), a
// missing or null period, a period ParsePeriod does not read, an op other
// than upsert or delete (an absent or empty op is an upsert), an upsert
// without a finite value, a frequency ParseFrequency does not read. One bad
// row fails the whole request, and every parse error wraps ErrBadInput; a
// request over MaxIngestRows or MaxIngestBytes wraps ErrTooLarge.

// parseError classifies a parse error: a body cut off by the HTTP layer's
// limit is too large, anything else bad input.
func parseError(err error) error {
	if err == nil || errors.Is(err, ErrBadInput) || errors.Is(err, ErrTooLarge) {
		return err
	}
	var mb *http.MaxBytesError
	if errors.As(err, &mb) {
		return fmt.Errorf("%w: body over %d bytes", ErrTooLarge, mb.Limit)
	}
	return fmt.Errorf("%w: %w", ErrBadInput, err)
}

func tooManyRows(what string) error {
	return fmt.Errorf("%w: %s: more than %d rows in one request", ErrTooLarge, what, MaxIngestRows)
}

// parseOp reads an op cell: "" and upsert are an upsert.
func parseOp(s string) (format.Op, error) {
	switch {
	case s == "" || strings.EqualFold(s, "upsert"):
		return format.Upsert, nil
	case strings.EqualFold(s, "delete"):
		return format.Delete, nil
	}
	return 0, fmt.Errorf("op %q: want upsert or delete", s)
}

// ParseRowsCSV reads update rows (seq left 0 for the caller to assign).
// Columns: series, period, value (not needed when del), and optionally op
// (upsert|delete), unit, name, source, frequency; metadata is attached to
// the first record of each series that has any. Any bad line fails the
// whole input with name:line and the reason.
func ParseRowsCSV(r io.Reader, name string, cols RowColumns, del bool) ([]format.Record, error) {
	recs, err := parseRowsCSV(r, name, cols, del)
	return recs, parseError(err)
}

func parseRowsCSV(r io.Reader, name string, cols RowColumns, del bool) ([]format.Record, error) {
	cols = cols.withDefaults()
	cr := csv.NewReader(r)
	cr.ReuseRecord = true
	head, err := cr.Read()
	if err != nil {
		return nil, fmt.Errorf("%s: no header: %w", name, err)
	}
	col := map[string]int{}
	for i, h := range head {
		h = strings.TrimPrefix(strings.TrimSpace(h), "\ufeff")
		if _, dup := col[h]; dup {
			return nil, fmt.Errorf("%s: column %q appears twice", name, h)
		}
		col[h] = i
	}
	need := func(c string) (int, error) {
		i, ok := col[c]
		if !ok {
			return 0, fmt.Errorf("%s: no column %q (have %s)", name, c, strings.Join(head, ", "))
		}
		return i, nil
	}
	opt := func(c string) int {
		if i, ok := col[c]; ok {
			return i
		}
		return -1
	}
	si, err := need(cols.Series)
	if err != nil {
		return nil, err
	}
	pi, err := need(cols.Period)
	if err != nil {
		return nil, err
	}
	vi, oi := -1, opt("op")
	if !del {
		if vi, err = need(cols.Value); err != nil {
			return nil, err
		}
	}
	ui, ni, sri, fi := opt("unit"), opt("name"), opt("source"), opt("frequency")
	cell := func(rec []string, i int) string {
		if i < 0 || i >= len(rec) {
			return ""
		}
		return strings.TrimSpace(rec[i])
	}
	var out []format.Record
	b := newRowBuilder()
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		line, _ := cr.FieldPos(0)
		op, err := parseOp(cell(rec, oi))
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, line, err)
		}
		if del {
			op = format.Delete
		}
		p, perr := textPeriod(cell(rec, pi))
		var v float64
		var verr error
		if op == format.Upsert {
			v, verr = textValue(cell(rec, vi))
		}
		r, err := b.row(cell(rec, si), p, perr, op, v, verr, cell(rec, ui), cell(rec, ni), cell(rec, sri), cell(rec, fi))
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, line, err)
		}
		if len(out) == MaxIngestRows {
			return nil, tooManyRows(name)
		}
		out = append(out, r)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no rows", name)
	}
	return out, nil
}

// rowBuilder validates one row at a time and attaches metadata once per
// series.
type rowBuilder struct{ seen map[string]bool }

func newRowBuilder() *rowBuilder { return &rowBuilder{seen: map[string]bool{}} }

var (
	errNoPeriod = errors.New("no period")
	errNoValue  = errors.New("no value")
)

// textPeriod reads a period cell: "" is no period.
func textPeriod(s string) (int64, error) {
	if s == "" {
		return 0, errNoPeriod
	}
	return cook.ParsePeriod(s)
}

// textValue reads a value cell: "" is no value.
func textValue(s string) (float64, error) {
	if s == "" {
		return 0, errNoValue
	}
	return cook.ParseValue(s)
}

// row makes one record of a row whose period and value the caller has
// read (perr, verr: why they could not be; verr is ignored for a delete).
// The id is validated the first time it is seen.
func (b *rowBuilder) row(id string, p int64, perr error, op format.Op, v float64, verr error, unit, name, source, freq string) (format.Record, error) {
	first := !b.seen[id]
	if first {
		if err := format.ValidSeriesID(id); err != nil {
			return format.Record{}, err
		}
	}
	if perr != nil {
		return format.Record{}, perr
	}
	r := format.Record{Op: op, SeriesID: id, Period: p}
	if op == format.Upsert {
		if verr != nil {
			return format.Record{}, verr
		}
		r.Value = v
	}
	if first {
		m := format.RecordMeta{Unit: unit, Name: name, Source: source}
		if freq != "" {
			f, err := format.ParseFrequency(freq)
			if err != nil {
				return format.Record{}, err
			}
			m.Frequency = f
		}
		b.seen[id] = true
		if m != (format.RecordMeta{}) {
			r.Meta = &m
		}
	}
	return r, nil
}

// jsonRow is one row of a JSON ingest body. Period is an ISO string or a
// number of unix seconds.
type jsonRow struct {
	SeriesID  string          `json:"series_id"`
	Period    json.RawMessage `json:"period"`
	Value     json.RawMessage `json:"value"`
	Op        string          `json:"op"`
	Unit      string          `json:"unit"`
	Name      string          `json:"name"`
	Source    string          `json:"source"`
	Frequency string          `json:"frequency"`
}

// ParseRowsJSON reads {"rows":[{"series_id","period","value","op"?,...}]}.
// Nothing but white space may follow the object.
func ParseRowsJSON(r io.Reader) ([]format.Record, error) {
	recs, err := parseRowsJSON(r)
	return recs, parseError(err)
}

func parseRowsJSON(r io.Reader) ([]format.Record, error) {
	var body struct {
		Rows []jsonRow `json:"rows"`
	}
	dec := json.NewDecoder(r)
	if err := dec.Decode(&body); err != nil {
		return nil, fmt.Errorf("json body: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		if err == nil || isSyntax(err) {
			return nil, fmt.Errorf("json body: data after the object at byte %d", dec.InputOffset())
		}
		return nil, fmt.Errorf("json body: %w", err)
	}
	if len(body.Rows) == 0 {
		return nil, errors.New("json body: no rows")
	}
	if len(body.Rows) > MaxIngestRows {
		return nil, tooManyRows("json body")
	}
	b := newRowBuilder()
	out := make([]format.Record, 0, len(body.Rows))
	for i, jr := range body.Rows {
		op, err := parseOp(jr.Op)
		if err != nil {
			return nil, fmt.Errorf("row %d: %w", i, err)
		}
		period, err := jsonPeriod(jr.Period)
		if err != nil {
			return nil, fmt.Errorf("row %d: %w", i, err)
		}
		p, perr := textPeriod(period)
		var v float64
		var verr error
		if op == format.Upsert {
			switch raw := string(jr.Value); {
			case raw == "" || raw == "null":
				verr = errNoValue
			case raw[0] == '"':
				verr = fmt.Errorf("value %s: %w", raw, cook.ErrNotNumber)
			default:
				v, verr = cook.ParseValue(raw)
			}
		}
		r, err := b.row(jr.SeriesID, p, perr, op, v, verr, jr.Unit, jr.Name, jr.Source, jr.Frequency)
		if err != nil {
			return nil, fmt.Errorf("row %d: %w", i, err)
		}
		out = append(out, r)
	}
	return out, nil
}

func isSyntax(err error) bool {
	var se *json.SyntaxError
	return errors.As(err, &se)
}

// jsonPeriod reads a JSON period: a string for ParsePeriod, or an integer
// of unix seconds. null and absent are "".
func jsonPeriod(raw json.RawMessage) (string, error) {
	s := string(raw)
	switch {
	case s == "" || s == "null":
		return "", nil
	case len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' && !strings.ContainsRune(s, '\\'):
		return s[1 : len(s)-1], nil // the common case: nothing to unescape
	case s[0] == '"':
		var v string
		if err := json.Unmarshal(raw, &v); err != nil {
			return "", err
		}
		return v, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < -1<<40 || n > 1<<40 {
		return "", fmt.Errorf("period %s: want a date string or integer unix seconds", s)
	}
	return time.Unix(n, 0).UTC().Format(time.RFC3339), nil
}

// ParseRowsArrow reads an Arrow IPC stream with columns series_id
// (string), period (timestamp, date32/64 or string), value (float64 or
// int64) and optionally op, unit, name, source, frequency (strings). The
// stream is read into memory (at most MaxIngestBytes) and each message's
// lengths are checked against the bytes present before anything is
// allocated for it (cook.NewIPCStreamReader).
func ParseRowsArrow(r io.Reader) ([]format.Record, error) {
	recs, err := parseRowsArrow(r)
	return recs, parseError(err)
}

func parseRowsArrow(r io.Reader) (out []format.Record, err error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxIngestBytes+1))
	if err != nil {
		return nil, fmt.Errorf("arrow stream: %w", err)
	}
	if len(data) > MaxIngestBytes {
		return nil, fmt.Errorf("%w: arrow stream over %d bytes", ErrTooLarge, MaxIngestBytes)
	}
	rd, err := cook.NewIPCStreamReader(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("arrow stream: %w", err)
	}
	defer rd.Release()
	defer func() {
		// arrow-go panics on some inconsistent buffers; the row loop
		// below indexes arrays it did not validate.
		if p := recover(); p != nil {
			out, err = nil, fmt.Errorf("arrow stream: malformed record batch: %v", p)
		}
	}()
	sc := rd.Schema()
	cols := map[string]int{}
	for i, f := range sc.Fields() {
		if _, dup := cols[f.Name]; dup {
			return nil, fmt.Errorf("arrow stream: column %q appears twice", f.Name)
		}
		cols[f.Name] = i
	}
	idx := func(n string) int {
		if i, ok := cols[n]; ok {
			return i
		}
		return -1
	}
	si, pi, vi := idx("series_id"), idx("period"), idx("value")
	if si < 0 || pi < 0 {
		return nil, errors.New("arrow stream: needs series_id and period columns")
	}
	var strs [7]int // series_id, op, unit, name, source, frequency, period (if utf8)
	for k, n := range []string{"series_id", "op", "unit", "name", "source", "frequency"} {
		strs[k] = idx(n)
		if c := strs[k]; c >= 0 && sc.Field(c).Type.ID() != arrow.STRING {
			return nil, fmt.Errorf("arrow stream: column %q must be utf8, not %s", n, sc.Field(c).Type)
		}
	}
	switch sc.Field(pi).Type.ID() {
	case arrow.TIMESTAMP, arrow.DATE32, arrow.DATE64, arrow.STRING:
	default:
		return nil, fmt.Errorf("arrow stream: period must be timestamp, date or utf8, not %s", sc.Field(pi).Type)
	}
	if vi >= 0 {
		switch sc.Field(vi).Type.ID() {
		case arrow.FLOAT64, arrow.INT64:
		default:
			return nil, fmt.Errorf("arrow stream: value must be float64 or int64, not %s", sc.Field(vi).Type)
		}
	}
	tsPer := int64(1) // a timestamp period's units per second
	if ts, ok := sc.Field(pi).Type.(*arrow.TimestampType); ok {
		tsPer = int64(time.Second / ts.Unit.Multiplier())
	}
	b := newRowBuilder()
	for rd.Next() {
		rec := rd.RecordBatch()
		str := func(c, i int) string {
			if c < 0 {
				return ""
			}
			a := rec.Column(c).(*array.String)
			if a.IsNull(i) {
				return ""
			}
			return a.Value(i)
		}
		for i := 0; i < int(rec.NumRows()); i++ {
			op, err := parseOp(str(strs[1], i))
			if err != nil {
				return nil, fmt.Errorf("arrow row %d: %w", len(out), err)
			}
			var v float64
			verr := errNoValue
			if vi >= 0 && rec.Column(vi).IsValid(i) {
				switch c := rec.Column(vi).(type) {
				case *array.Float64:
					if v, verr = c.Value(i), nil; v-v != 0 {
						verr = fmt.Errorf("value %v: %w", v, cook.ErrNotFinite)
					}
				case *array.Int64:
					v, verr = float64(c.Value(i)), nil
				}
			}
			var p int64
			perr := errNoPeriod
			if pc := rec.Column(pi); pc.IsValid(i) {
				switch c := pc.(type) {
				case *array.Timestamp:
					p, perr = floorDiv(int64(c.Value(i)), tsPer), nil
				case *array.Date32:
					p, perr = int64(c.Value(i))*86400, nil
				case *array.Date64:
					p, perr = floorDiv(int64(c.Value(i)), 1000), nil
				case *array.String:
					p, perr = textPeriod(c.Value(i))
				}
			}
			r, err := b.row(str(si, i), p, perr, op, v, verr, str(strs[2], i), str(strs[3], i), str(strs[4], i), str(strs[5], i))
			if err != nil {
				return nil, fmt.Errorf("arrow row %d: %w", len(out), err)
			}
			if len(out) == MaxIngestRows {
				return nil, tooManyRows("arrow stream")
			}
			out = append(out, r)
		}
	}
	if err := rd.Err(); err != nil {
		return nil, fmt.Errorf("arrow stream: %w", err)
	}
	if len(out) == 0 {
		return nil, errors.New("arrow stream: no rows")
	}
	return out, nil
}

// inferNewSeries gives each series of recs that has no frequency and that
// the dataset does not hold yet (has is false) the frequency cook would
// infer from its periods in recs (format.InferFrequency), on the metadata
// of its first record: that record is where the delta takes a new series'
// frequency from, and where every companion applying the same records
// does too. Without it the delta defaulted a new series to daily and
// folded 200,000 hourly rows into 8,334 days. When two distinct periods of
// the batch would fall in one bucket of the inferred frequency (cook's
// median spacing says weekly for irregular daily rows), the next finer
// frequency is taken, down to hourly: distinct periods never collapse
// into one point. A batch whose new series has two periods in one hour
// is refused (wrapping ErrBadInput, format.ErrBadRecord and
// ErrNoFrequency): it needs a frequency column.
//
// It returns the number of series it gave a frequency.
func inferNewSeries(recs []format.Record, has func(id string) (bool, error)) (int, error) {
	type series struct {
		first   int
		freq    bool
		periods []int64
	}
	byID := map[string]*series{}
	var order []string
	for i := range recs {
		r := &recs[i]
		s := byID[r.SeriesID]
		if s == nil {
			s = &series{first: i}
			byID[r.SeriesID] = s
			order = append(order, r.SeriesID)
		}
		if r.Meta != nil && r.Meta.Frequency != "" {
			s.freq = true
		}
	}
	var need []*series
	for _, id := range order {
		s := byID[id]
		if s.freq {
			continue
		}
		ok, err := has(id)
		if err != nil {
			return 0, err
		}
		if !ok {
			need = append(need, s)
		}
	}
	if len(need) == 0 {
		return 0, nil
	}
	for i := range recs {
		if s := byID[recs[i].SeriesID]; !s.freq {
			s.periods = append(s.periods, recs[i].Period)
		}
	}
	for _, s := range need {
		slices.Sort(s.periods)
		s.periods = slices.Compact(s.periods)
		f, ok := collisionFree(format.InferFrequency(s.periods), s.periods)
		if !ok {
			id := recs[s.first].SeriesID
			a, b := collision(format.Hourly, s.periods)
			return 0, fmt.Errorf("%w: %w: %w: new series %q: periods %s and %s fall in one hour, the finest frequency; give the series a frequency",
				ErrBadInput, format.ErrBadRecord, ErrNoFrequency, id, time.Unix(a, 0).UTC().Format(time.RFC3339), time.Unix(b, 0).UTC().Format(time.RFC3339))
		}
		r := &recs[s.first]
		if r.Meta == nil {
			r.Meta = &format.RecordMeta{}
		} else {
			m := *r.Meta // the caller's Meta may be shared
			r.Meta = &m
		}
		r.Meta.Frequency = f
	}
	return len(need), nil
}

// frequencies from the finest to the coarsest.
var frequencies = []format.Frequency{format.Hourly, format.Daily, format.Weekly, format.Monthly, format.Quarterly, format.Annual}

// collisionFree returns f, or else the coarsest frequency finer than f,
// under which no two of the sorted distinct periods share a bucket.
func collisionFree(f format.Frequency, periods []int64) (format.Frequency, bool) {
	k := slices.Index(frequencies, f)
	for ; k >= 0; k-- {
		if a, _ := collision(frequencies[k], periods); a == b0 {
			return frequencies[k], true
		}
	}
	return "", false
}

const b0 = math.MinInt64

// collision returns two neighbouring periods (sorted, distinct) that share
// a bucket of f, or (b0, b0).
func collision(f format.Frequency, periods []int64) (int64, int64) {
	for k := 1; k < len(periods); k++ {
		if f.Normalize(periods[k-1]) == f.Normalize(periods[k]) {
			return periods[k-1], periods[k]
		}
	}
	return b0, b0
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}
