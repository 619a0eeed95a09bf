package server

import (
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"

	"github.com/energyscope/energyscope/localcache/delta"
	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/server/cook"
)

// RowColumns names the columns of update rows.
type RowColumns struct {
	Series, Period, Value string // defaults series_id, period, value
}

func (c RowColumns) withDefaults() RowColumns {
	if c.Series == "" {
		c.Series = "series_id"
	}
	if c.Period == "" {
		c.Period = "period"
	}
	if c.Value == "" {
		c.Value = "value"
	}
	return c
}

// MaxIngestRows bounds one ingest request.
const MaxIngestRows = 1_000_000

// ParseRowsCSV reads update rows (seq left 0 for the caller to assign).
// Columns: series, period, value (not needed when del), and optionally op
// (upsert|delete), unit, name, source, frequency; metadata is attached to
// the first record of each series that has any. Any bad line fails the
// whole input with name:line and the reason.
func ParseRowsCSV(r io.Reader, name string, cols RowColumns, del bool) ([]delta.Record, error) {
	cols = cols.withDefaults()
	cr := csv.NewReader(r)
	cr.ReuseRecord = true
	head, err := cr.Read()
	if err != nil {
		return nil, fmt.Errorf("%s: no header: %w", name, err)
	}
	col := map[string]int{}
	for i, h := range head {
		col[strings.TrimPrefix(strings.TrimSpace(h), "\ufeff")] = i
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
	var out []delta.Record
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
		op := delta.Upsert
		if del || strings.EqualFold(cell(rec, oi), "delete") {
			op = delta.Delete
		} else if o := cell(rec, oi); o != "" && !strings.EqualFold(o, "upsert") {
			return nil, fmt.Errorf("%s:%d: op %q: want upsert or delete", name, line, o)
		}
		r, err := b.row(cell(rec, si), cell(rec, pi), op, cell(rec, vi), cell(rec, ui), cell(rec, ni), cell(rec, sri), cell(rec, fi))
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, line, err)
		}
		out = append(out, r)
		if len(out) > MaxIngestRows {
			return nil, fmt.Errorf("%s: more than %d rows in one request", name, MaxIngestRows)
		}
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

func (b *rowBuilder) row(id, period string, op delta.Op, value, unit, name, source, freq string) (delta.Record, error) {
	if id == "" {
		return delta.Record{}, errors.New("empty series id")
	}
	p, err := cook.ParsePeriod(period)
	if err != nil {
		return delta.Record{}, fmt.Errorf("period: %w", err)
	}
	r := delta.Record{Op: op, SeriesID: id, Period: p}
	if op == delta.Upsert {
		v, err := strconv.ParseFloat(value, 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			return delta.Record{}, fmt.Errorf("value %q is not a finite number", value)
		}
		r.Value = v
	}
	if !b.seen[id] {
		b.seen[id] = true
		m := delta.Meta{Unit: unit, Name: name, Source: source}
		if freq != "" {
			f, err := format.ParseFrequency(freq)
			if err != nil {
				return delta.Record{}, err
			}
			m.Frequency = f
		}
		if m != (delta.Meta{}) {
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
	Value     *float64        `json:"value"`
	Op        string          `json:"op"`
	Unit      string          `json:"unit"`
	Name      string          `json:"name"`
	Source    string          `json:"source"`
	Frequency string          `json:"frequency"`
}

// ParseRowsJSON reads {"rows":[{"series_id","period","value","op"?,...}]}.
func ParseRowsJSON(r io.Reader) ([]delta.Record, error) {
	var body struct {
		Rows []jsonRow `json:"rows"`
	}
	dec := json.NewDecoder(r)
	if err := dec.Decode(&body); err != nil {
		return nil, fmt.Errorf("json body: %w", err)
	}
	if len(body.Rows) == 0 {
		return nil, errors.New("json body: no rows")
	}
	if len(body.Rows) > MaxIngestRows {
		return nil, fmt.Errorf("json body: more than %d rows", MaxIngestRows)
	}
	b := newRowBuilder()
	out := make([]delta.Record, 0, len(body.Rows))
	for i, jr := range body.Rows {
		op := delta.Upsert
		switch strings.ToLower(jr.Op) {
		case "", "upsert":
		case "delete":
			op = delta.Delete
		default:
			return nil, fmt.Errorf("row %d: op %q: want upsert or delete", i, jr.Op)
		}
		period := strings.Trim(string(jr.Period), `"`)
		if n, err := strconv.ParseInt(period, 10, 64); err == nil && len(jr.Period) > 0 && jr.Period[0] != '"' {
			period = time.Unix(n, 0).UTC().Format(time.RFC3339)
		}
		value := ""
		if jr.Value != nil {
			value = strconv.FormatFloat(*jr.Value, 'g', -1, 64)
		} else if op == delta.Upsert {
			return nil, fmt.Errorf("row %d: no value", i)
		}
		r, err := b.row(jr.SeriesID, period, op, value, jr.Unit, jr.Name, jr.Source, jr.Frequency)
		if err != nil {
			return nil, fmt.Errorf("row %d: %w", i, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// ParseRowsArrow reads an Arrow IPC stream with columns series_id
// (string), period (timestamp, date32/64 or string), value (float64) and
// optionally op (string).
func ParseRowsArrow(r io.Reader) ([]delta.Record, error) {
	rd, err := ipc.NewReader(r)
	if err != nil {
		return nil, fmt.Errorf("arrow stream: %w", err)
	}
	defer rd.Release()
	sc := rd.Schema()
	idx := func(n string) int {
		if is := sc.FieldIndices(n); len(is) > 0 {
			return is[0]
		}
		return -1
	}
	si, pi, vi, oi := idx("series_id"), idx("period"), idx("value"), idx("op")
	if si < 0 || pi < 0 {
		return nil, errors.New("arrow stream: needs series_id and period columns")
	}
	b := newRowBuilder()
	var out []delta.Record
	for rd.Next() {
		rec := rd.RecordBatch()
		ids, ok := rec.Column(si).(*array.String)
		if !ok {
			return nil, errors.New("arrow stream: series_id must be utf8")
		}
		for i := 0; i < int(rec.NumRows()); i++ {
			op := delta.Upsert
			if oi >= 0 {
				if s, ok := rec.Column(oi).(*array.String); ok && strings.EqualFold(s.Value(i), "delete") {
					op = delta.Delete
				}
			}
			value := ""
			if vi >= 0 && rec.Column(vi).IsValid(i) {
				switch v := rec.Column(vi).(type) {
				case *array.Float64:
					value = strconv.FormatFloat(v.Value(i), 'g', -1, 64)
				case *array.Int64:
					value = strconv.FormatInt(v.Value(i), 10)
				default:
					return nil, errors.New("arrow stream: value must be float64 or int64")
				}
			}
			var period string
			switch p := rec.Column(pi).(type) {
			case *array.Timestamp:
				unit := p.DataType().(*arrow.TimestampType).Unit
				period = p.Value(i).ToTime(unit).UTC().Format(time.RFC3339)
			case *array.Date32:
				period = p.Value(i).ToTime().Format("2006-01-02")
			case *array.Date64:
				period = p.Value(i).ToTime().Format("2006-01-02")
			case *array.String:
				period = p.Value(i)
			default:
				return nil, errors.New("arrow stream: period must be timestamp, date or utf8")
			}
			r, err := b.row(ids.Value(i), period, op, value, "", "", "", "")
			if err != nil {
				return nil, fmt.Errorf("arrow row %d: %w", len(out), err)
			}
			out = append(out, r)
			if len(out) > MaxIngestRows {
				return nil, fmt.Errorf("arrow stream: more than %d rows", MaxIngestRows)
			}
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
