package xlsx

import (
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/energyscope/energyscope/functions"
)

// Limits of a sheet and of what an export takes on.
const (
	// MaxRows is the number of data rows a sheet holds below its header (Excel's
	// 1,048,576 rows less one).
	MaxRows = 1_048_575
	// MaxCells bounds rows x series. Memory is about 16 bytes per exported point, so
	// this keeps an export under a few hundred MB; past it, narrow the range or re-sample.
	MaxCells = 16 << 20
	// MaxChartSeries is the most series one Excel chart plots; an export of more
	// charts the first MaxChartSeries and says so on the Info sheet.
	MaxChartSeries = 255
)

// ErrRequest marks an error in the request itself (no series, a date or option that
// cannot be read, a bad output name): the caller's input, not the data or the disk.
var ErrRequest = errors.New("invalid export request")

// reqError is an error in the request: its own message, matching ErrRequest.
type reqError struct{ msg string }

func (e *reqError) Error() string { return e.msg }
func (e *reqError) Unwrap() error { return ErrRequest }

func badRequest(format string, args ...any) error {
	return &reqError{msg: fmt.Sprintf(format, args...)}
}

// Request says what to export.
// RefreshProperty is the custom document property of a formulas workbook
// (Request.Formulas) that asks the Excel add-in to recalculate it when the
// add-in runs in it; the add-in's functions.js names it too.
const RefreshProperty = "EnergyScopeRefresh"

type Request struct {
	// Series are the ids to export, one column each, in this order. Surrounding spaces
	// are trimmed; empty and repeated ids are dropped.
	Series []string
	// From and To bound the dates, inclusive, in any form ES.Get reads (2020,
	// 2020-03, 2020-03-15, 2020-Q1, -1Y, today, ...; see docs/functions.md). Empty
	// means unbounded. A To that names a year, month or day covers all of it.
	From, To string
	// Per, Agg and Fill are ES.Get's options of those names ("M", "avg", "prev"); empty
	// means as stored, last and none.
	Per, Agg, Fill string
	// Formulas writes one live ES.Get formula on the Data sheet, which spills the
	// data when Excel calculates it with the add-in, instead of a table of values. The
	// values are still stored as the formula's cached result (see the package doc).
	Formulas bool
	// Provenance, if set, gives the snapshot id and the sequence number each series is
	// served at, for the Info sheet.
	Provenance func(seriesID string) (snapshotID string, seq uint64)
	// Now is the export time and the "today" of relative dates; nil means time.Now.
	Now func() time.Time
}

// Summary reports a finished export.
type Summary struct {
	Series      int    // columns of values
	Rows        int    // dates, one row each
	Cells       int    // value cells with a number
	First, Last int64  // first and last date, unix seconds UTC
	Charted     int    // series in the chart (at most MaxChartSeries)
	Bytes       int64  // size of the workbook
	Path        string // the file written, for ExportFile
}

// notFoundError names every series the Source does not have.
type notFoundError struct{ ids []string }

func (e *notFoundError) Error() string { return "unknown series " + strings.Join(e.ids, ", ") }
func (e *notFoundError) Unwrap() error { return functions.ErrNotFound }

// plan is a validated request with its data, ready to be written.
type plan struct {
	req      Request
	ids      []string
	infos    []functions.SeriesInfo
	opts     functions.Options
	from, to int64
	frame    *functions.Frame
	now      time.Time
	intraday bool // some date has a time of day: dates show hours and minutes
}

// prepare checks the request, reads the series' metadata and data, and sizes the sheet.
// Nothing is written before it succeeds.
func prepare(src functions.Source, req Request) (*plan, error) {
	if src == nil {
		return nil, errors.New("no data source")
	}
	p := &plan{req: req, now: time.Now()}
	if req.Now != nil {
		p.now = req.Now()
	}
	seen := make(map[string]bool, len(req.Series))
	for _, s := range req.Series {
		id := strings.TrimSpace(s)
		if id == "" || seen[id] {
			continue
		}
		seen[id] = true
		p.ids = append(p.ids, id)
	}
	switch {
	case len(p.ids) == 0:
		return nil, badRequest("no series given")
	case len(p.ids) > functions.MaxSeries:
		return nil, badRequest("%d series; an export takes at most %d", len(p.ids), functions.MaxSeries)
	}
	var err error
	if p.from, err = functions.ParseDate(req.From, p.now, false); err != nil {
		return nil, badRequest("from: %v", err)
	}
	if p.to, err = functions.ParseDate(req.To, p.now, true); err != nil {
		return nil, badRequest("to: %v", err)
	}
	if p.from > p.to {
		return nil, badRequest("from %s is after to %s", strings.TrimSpace(req.From), strings.TrimSpace(req.To))
	}
	var optArgs []any
	for _, kv := range [][2]string{{"per", req.Per}, {"agg", req.Agg}, {"fill", req.Fill}} {
		if v := strings.TrimSpace(kv[1]); v != "" {
			optArgs = append(optArgs, kv[0]+"="+v)
		}
	}
	if p.opts, err = functions.ParseOptions([]any{optArgs}); err != nil {
		return nil, badRequest("%v", err)
	}

	// Metadata first, so that every unknown id is named in one message.
	var unknown []string
	p.infos = make([]functions.SeriesInfo, len(p.ids))
	for i, id := range p.ids {
		in, err := src.Info(id)
		switch {
		case errors.Is(err, functions.ErrNotFound):
			unknown = append(unknown, fmt.Sprintf("%q", id))
			continue
		case err != nil:
			return nil, fmt.Errorf("series %q: %w", id, err)
		}
		p.infos[i] = in
	}
	if len(unknown) > 0 {
		return nil, &notFoundError{ids: unknown}
	}

	eng := &functions.Engine{Src: src, Now: func() time.Time { return p.now }}
	if p.frame, err = eng.Frame(p.ids, p.from, p.to, p.opts); err != nil {
		return nil, err
	}
	rows := len(p.frame.Dates)
	if rows > MaxRows {
		return nil, fmt.Errorf("%d dates: more rows than a sheet holds (%d); narrow the dates or re-sample (per=)", rows, MaxRows)
	}
	if cells := rows * len(p.ids); cells > MaxCells {
		return nil, fmt.Errorf("%d dates x %d series = %d cells; an export takes at most %d: narrow the dates, re-sample (per=) or export fewer series",
			rows, len(p.ids), cells, MaxCells)
	}
	for _, t := range p.frame.Dates {
		if t%86400 != 0 {
			p.intraday = true
			break
		}
	}
	return p, nil
}

// Export writes the workbook for req, read from src, to w. progress, if set, is called
// with the data rows written so far and their total. On error, w may hold part of a
// workbook: use ExportFile for a file, which leaves nothing behind.
func Export(w io.Writer, src functions.Source, req Request, progress func(done, total int)) (Summary, error) {
	p, err := prepare(src, req)
	if err != nil {
		return Summary{}, err
	}
	return p.write(w, progress)
}

// summary is what write reports besides the byte count.
func (p *plan) summary() Summary {
	s := Summary{Series: len(p.ids), Rows: len(p.frame.Dates), Charted: p.planCharts().charted}
	if n := len(p.frame.Dates); n > 0 {
		s.First, s.Last = p.frame.Dates[0], p.frame.Dates[n-1]
	}
	return s
}

// isFinite reports whether v is a number a cell can hold.
func isFinite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
