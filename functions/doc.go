// Package functions gives the Excel worksheet functions ES.Get, ES.Latest, ES.Info,
// ES.Search, ES.Live and ES.Revisions their meaning, in plain Go over a small Source
// interface.
//
// It is the layer between what an analyst types in a cell and the store: it reads
// arguments as they arrive from Excel (decoded JSON: string, float64, bool, nil for an
// omitted argument, [][]any for a range), parses dates and options, asks the Source for
// points, re-samples, aligns several series on one date column, and returns a 2-D array
// that spills. It has no HTTP, no Wails and no store: functions/bridge decodes requests
// and calls Engine.Eval, and internal/wiring adapts localcache.Store to Source, so that
// neither imports the other. It imports only the standard library and internal/calendar.
//
// Map of the package:
//
//   - source.go: Source, SeriesInfo and ErrNotFound, the seam to the store.
//   - engine.go: Engine, Eval and Call (dispatch), Result and CellError, argument readers.
//   - grid.go: Grid, a result's cells held by type (numbers unboxed in one []float64).
//   - dates.go: ParseDate (every date form a cell may hold), ExcelSerial and FromSerial.
//   - options.go: ParseOptions and Options (per, agg, days, fill, chg, yoy, ma, rebase,
//     scale, order, headers, dates, transpose, last).
//   - get.go: ES.Get: assemble (fetch, re-sample, align on the union of dates or a
//     calendar, fill), lay out.
//   - transform.go: looking back before the start, calendars, and the transforms
//     (chg, yoy, ma, rebase, scale) over a column's points or its filled rows.
//   - suggest.go: unknown ids: case-insensitive resolution and "did you mean" through
//     Source.Search; EditDistance and Nearest, which cmd/es uses for its commands too.
//   - meta.go: ES.Latest, ES.Live, ES.Info and ES.Search.
//   - vintage.go: vintages (issue 12): ParseAsOf (asof=WHEN), VintageSource (the
//     optional part of a Source that reads as of a vintage and lists revisions), the
//     typed vintage errors, ES.Get's as-of view of the Source, and ES.Revisions.
//   - export.go: Frame, an ES.Get held column by column for callers that lay out more
//     cells than a spilled result holds (functions/xlsx), bounded by MaxFrameCells.
//   - calendar.go: yearBefore and the seconds of a day; the buckets of per= (start,
//     next, previous, count) are internal/calendar's Frequency, the one owner of period
//     arithmetic that the snapshot format shares, so the per-point paths never use
//     time.Time.
//
// Invariants: Eval and Call never panic on any argument values; every Result is either a
// Grid of at most Engine.MaxCells cells or a CellError; cells are finite numbers, string,
// bool, empty, or *CellError (an error in one cell or column, which the bridge turns
// into a cell error). Call also boxes the cells into Result.Value ([][]any); the bridge
// uses Eval and writes the Grid's numbers without boxing them. Times are unix seconds
// UTC throughout; dates shown to Excel are serial numbers of the 1900 date system, where
// 25569 is 1970-01-01 and the fraction is the time of day. The user-facing reference is docs/functions.md.
package functions
