package xlsx

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/xuri/excelize/v2"

	"github.com/energyscope/energyscope/functions"
)

// Sheet, table and style names.
const (
	DataSheet  = "Data"
	ChartSheet = "Chart"
	InfoSheet  = "Info"
	TableName  = "ESData"

	dateFormat     = "yyyy-mm-dd"
	dateTimeFormat = "yyyy-mm-dd hh:mm"
	tableStyle     = "TableStyleMedium2"

	// udfName is ES.Get as Excel stores a call to the add-in's custom function in a
	// file: "_xldudf_" then the namespace and the function name joined by "_". Excel
	// shows it as ES.GET once the add-in has registered its functions.
	udfName = "_xldudf_ES_GET"
	// excelCalcID is the calcId Excel 365 writes (unchanged since Excel 2019).
	excelCalcID = 191029
	// progressEvery is how many rows go by between progress calls.
	progressEvery = 4096
)

// write lays the workbook out and writes it to w.
func (p *plan) write(w io.Writer, progress func(done, total int)) (Summary, error) {
	f := excelize.NewFile()
	defer f.Close() // removes the stream writer's temp files
	sum := p.summary()
	cw := &countWriter{w: w}
	hook := &zipHook{out: cw, dateAxis: !p.intraday}
	if p.req.Formulas {
		hook.anchor = &anchorPatch{
			sheet: "xl/worksheets/sheet1.xml", // the first sheet, renamed Data below
			cell:  "A2",
			ref:   "A2:" + cellName(len(p.ids)+1, len(p.frame.Dates)+1),
		}
	}
	f.SetZipWriter(hook.new)

	if err := f.SetSheetName("Sheet1", DataSheet); err != nil {
		return sum, err
	}
	dateFmt := dateFormat
	if p.intraday {
		dateFmt = dateTimeFormat
	}
	dateStyle, err := f.NewStyle(&excelize.Style{CustomNumFmt: &dateFmt})
	if err != nil {
		return sum, err
	}
	if sum.Cells, err = p.writeData(f, dateStyle, progress); err != nil {
		return sum, fmt.Errorf("data sheet: %w", err)
	}
	charts := p.planCharts()
	sum.Charted = charts.charted
	if err := p.addCharts(f, charts); err != nil {
		return sum, fmt.Errorf("chart: %w", err)
	}
	if err := p.writeInfo(f, dateStyle, charts); err != nil {
		return sum, fmt.Errorf("info sheet: %w", err)
	}
	// Data is the active sheet as it is (File.SetActiveSheet would read the streamed
	// sheet back into memory).
	created := p.now.UTC().Format(time.RFC3339)
	if err := f.SetDocProps(&excelize.DocProperties{
		Title:       "EnergyScope export: " + clipText(strings.Join(p.ids, ", "), 200),
		Creator:     "EnergyScope",
		Created:     created,
		Modified:    created,
		Description: "Exported by es export; the Info sheet says what and how.",
	}); err != nil {
		return sum, err
	}
	// A formulas workbook tells the add-in to refresh it when it runs there
	// (esRefreshOnOpen in functions/addin/functions.js): the file itself asks
	// for no recalculation, so that it reads the same without the add-in.
	if p.req.Formulas {
		if err := f.SetCustomProps(excelize.CustomProperty{Name: RefreshProperty, Value: "formulas"}); err != nil {
			return sum, err
		}
	}
	// calcId is the calculation engine of current Excel (365, 2019 and later): a
	// file saved by an older engine (excelize writes 122211) is recalculated in full
	// on open, which without the add-in turns every ES.GET into #NAME?. So a
	// formulas workbook opens on its cached values everywhere, and only the =NA()
	// cells of fill=na in values mode, written without a cached result and built
	// into every spreadsheet, ask for a recalculation on load.
	calc := &excelize.CalcPropsOptions{CalcID: new(uint)}
	*calc.CalcID = excelCalcID
	if p.opts.Fill == functions.FillNA && !p.req.Formulas {
		on := true
		calc.FullCalcOnLoad = &on
	}
	if err := f.SetCalcProps(calc); err != nil {
		return sum, err
	}
	// The hook writes the package to w as excelize produces it; excelize's own
	// buffer stays empty.
	if err := f.Write(io.Discard); err != nil {
		return sum, err
	}
	if err := hook.err(); err != nil {
		return sum, err
	}
	sum.Bytes = cw.n
	return sum, nil
}

// writeData streams the Data sheet: a header row, then one row per date, and the
// table over them (values mode) or the spilling formula (formulas mode).
func (p *plan) writeData(f *excelize.File, dateStyle int, progress func(done, total int)) (int, error) {
	sw, err := f.NewStreamWriter(DataSheet)
	if err != nil {
		return 0, err
	}
	ncol := len(p.ids) + 1
	dateWidth := 12.0
	if p.intraday {
		dateWidth = 17
	}
	if err := sw.SetColWidth(1, 1, dateWidth); err != nil {
		return 0, err
	}
	hdrs := headers(p.ids)
	layout, err := p.columnLayout(hdrs)
	if err != nil {
		return 0, err
	}
	valStyles := make([]int, len(p.ids))
	styleOf := map[string]int{}
	for j, c := range layout {
		if err := sw.SetColWidth(j+2, j+2, c.width); err != nil {
			return 0, err
		}
		id, ok := styleOf[c.numFmt]
		if !ok {
			nf := c.numFmt
			if id, err = f.NewStyle(&excelize.Style{CustomNumFmt: &nf}); err != nil {
				return 0, err
			}
			styleOf[nf] = id
		}
		valStyles[j] = id
	}
	// Dates that a refreshed formula spills past the rows written here still show as dates.
	if err := sw.SetColStyle(1, 1, dateStyle); err != nil {
		return 0, err
	}
	if err := sw.SetPanes(&excelize.Panes{Freeze: true, XSplit: 1, YSplit: 1, TopLeftCell: "B2", ActivePane: "bottomRight",
		Selection: []excelize.Selection{{SQRef: "B2", ActiveCell: "B2", Pane: "bottomRight"}}}); err != nil {
		return 0, err
	}
	header := make([]any, ncol)
	header[0] = "Date"
	for j, h := range hdrs {
		header[j+1] = h
	}
	if err := sw.SetRow("A1", header); err != nil {
		return 0, err
	}

	total := len(p.frame.Dates)
	row := make([]any, ncol)
	dateCell := excelize.Cell{StyleID: dateStyle}
	na := excelize.Cell{Formula: "NA()"}
	fillNA := p.opts.Fill == functions.FillNA && !p.req.Formulas
	cells := 0
	err = p.frame.Rows(func(i int, date int64, vals []float64) error {
		dateCell.Value = serial(date)
		if i == 0 && p.req.Formulas {
			// The anchor of the spill; the zip hook turns it into a dynamic array formula.
			dateCell.Formula = p.formula(udfName, true)
		} else {
			dateCell.Formula = ""
		}
		row[0] = dateCell
		for j, v := range vals {
			switch {
			case isFinite(v):
				row[j+1] = excelize.Cell{StyleID: valStyles[j], Value: v}
				cells++
			case fillNA:
				row[j+1] = na
			default:
				row[j+1] = nil
			}
		}
		if err := sw.SetRow("A"+strconv.Itoa(i+2), row); err != nil {
			return err
		}
		if progress != nil && (i+1)%progressEvery == 0 {
			progress(i+1, total)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	if progress != nil {
		progress(total, total)
	}
	if !p.req.Formulas {
		// A dynamic array cannot spill inside a table, so formulas mode has none.
		show := true
		if err := sw.AddTable(&excelize.Table{
			Range:          "A1:" + cellName(ncol, total+1),
			Name:           TableName,
			StyleName:      tableStyle,
			ShowRowStripes: &show,
		}); err != nil {
			return 0, err
		}
	}
	return cells, sw.Flush()
}

// columnFormat is how a series' column looks: its number format and width.
type columnFormat struct {
	numFmt string
	width  float64
}

// maxDecimals bounds the decimals a value column shows.
const maxDecimals = 6

// columnLayout gives each series a number format with as many decimals as its values
// have (at most maxDecimals, the same for every row, so that a column lines up) and
// thousands separators, and a width that fits its header and its widest value.
func (p *plan) columnLayout(hdrs []string) ([]columnFormat, error) {
	n := len(p.ids)
	dec := make([]int, n)
	big := make([]float64, n) // largest magnitude
	neg := make([]bool, n)
	err := p.frame.Rows(func(_ int, _ int64, vals []float64) error {
		for j, v := range vals {
			if !isFinite(v) {
				continue
			}
			if a := math.Abs(v); a > big[j] {
				big[j] = a
			}
			if v < 0 {
				neg[j] = true
			}
			if dec[j] < maxDecimals {
				dec[j] = max(dec[j], decimals(v, dec[j]))
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]columnFormat, n)
	for j := range out {
		nf := "#,##0"
		if dec[j] > 0 {
			nf += "." + strings.Repeat("0", dec[j])
		}
		intDigits := len(strconv.FormatFloat(math.Trunc(big[j]), 'f', 0, 64))
		w := intDigits + (intDigits-1)/3 // digits and separators
		if dec[j] > 0 {
			w += 1 + dec[j]
		}
		if neg[j] {
			w++
		}
		width := float64(max(w, utf8.RuneCountInString(hdrs[j]), 8) + 2)
		out[j] = columnFormat{numFmt: nf, width: min(width, 60)}
	}
	return out, nil
}

// decimals is the fewest decimals, at least from, that show v exactly (to the
// precision of a float64), or maxDecimals.
func decimals(v float64, from int) int {
	for d := from; d < maxDecimals; d++ {
		s := v * math.Pow10(d)
		if math.Abs(s-math.Round(s)) <= math.Max(1e-9, 1e-12*math.Abs(s)) {
			return d
		}
	}
	return maxDecimals
}

// serial is the Excel serial of t with the time of day rounded to 15 significant
// digits. Excel keeps 15 and excelize cuts longer numbers rather than rounding them,
// which would put 01:00 a hair below it (00:59:59.99...) when shown to the second.
func serial(t int64) float64 {
	s := functions.ExcelSerial(t)
	if s == math.Trunc(s) {
		return s
	}
	digits := 15 - len(strconv.FormatInt(int64(math.Abs(s)), 10))
	p := math.Pow10(digits)
	return math.Round(s*p) / p
}

// headers are the column names of the series: their ids, made unique ignoring case
// (as a table's columns must be) and distinct from "Date".
func headers(ids []string) []string {
	used := map[string]bool{"date": true}
	out := make([]string, len(ids))
	for j, id := range ids {
		h := id
		for n := 2; used[strings.ToLower(h)]; n++ {
			h = id + " (" + strconv.Itoa(n) + ")"
		}
		used[strings.ToLower(h)] = true
		out[j] = h
	}
	return out
}

// infoColumns head the per-series table of the Info sheet.
var infoColumns = []string{"Series", "Name", "Unit", "Frequency", "Source", "Dataset",
	"First", "Last", "Points", "Points exported", "Snapshot", "Seq", "Formula"}

// writeInfo writes the Info sheet: a row per series, then the export's settings.
func (p *plan) writeInfo(f *excelize.File, dateStyle int, charts chartPlan) error {
	if _, err := f.NewSheet(InfoSheet); err != nil {
		return err
	}
	set := func(cell string, vals []any) error { return f.SetSheetRow(InfoSheet, cell, &vals) }
	hdr := make([]any, len(infoColumns))
	for i, c := range infoColumns {
		hdr[i] = c
	}
	if err := set("A1", hdr); err != nil {
		return err
	}
	bold, err := f.NewStyle(&excelize.Style{Font: &excelize.Font{Bold: true}})
	if err != nil {
		return err
	}
	if err := f.SetRowStyle(InfoSheet, 1, 1, bold); err != nil {
		return err
	}
	for i, id := range p.ids {
		in := p.infos[i]
		var snap any
		var seq any
		if p.req.Provenance != nil {
			s, q := p.req.Provenance(id)
			snap, seq = s, q
		}
		var first, last any
		if in.Count > 0 {
			first, last = serial(in.First), serial(in.Last)
		}
		r := i + 2
		if err := set("A"+strconv.Itoa(r), []any{id, in.Name, in.Unit, in.Frequency, in.Source, in.Dataset,
			first, last, in.Count, p.frame.Points[i], snap, seq, p.seriesFormula(i)}); err != nil {
			return err
		}
		if err := f.SetCellStyle(InfoSheet, "G"+strconv.Itoa(r), "H"+strconv.Itoa(r), dateStyle); err != nil {
			return err
		}
	}
	none := func(s, dflt string) string {
		if s = strings.TrimSpace(s); s == "" {
			return dflt
		}
		return s
	}
	mode := "values"
	if p.req.Formulas {
		mode = "formulas: the Data sheet holds one ES.Get formula and its last result, shown as saved without the EnergyScope add-in; with it, the workbook refreshes when the add-in runs in it (or recalculate with Ctrl+Alt+F9)"
	}
	per, agg := "as stored", "-"
	if p.opts.Per != 0 {
		per, agg = string(p.opts.Per), p.opts.Agg.String()
	}
	sum := p.summary()
	chart := fmt.Sprintf("%d series", charts.charted)
	switch {
	case len(charts.dropped) > 0:
		chart = fmt.Sprintf("%d of %d series, a chart per unit for the first %d units; none for %s", charts.charted, len(p.ids), maxCharts, strings.Join(charts.dropped, ", "))
	case len(p.ids) > MaxChartSeries:
		chart = fmt.Sprintf("the first %d of %d series (an Excel chart plots at most %d)", charts.charted, len(p.ids), MaxChartSeries)
	}
	if len(charts.sheets) == 1 && len(charts.sheets[0].groups) == 2 {
		chart += fmt.Sprintf(", %s on the right-hand axis", unitLabel(charts.sheets[0].groups[1].unit))
	}
	settings := [][2]any{
		{"Exported at", p.now.UTC().Format("2006-01-02 15:04:05") + " UTC"},
		{"From", none(p.req.From, "(first point)")},
		{"To", none(p.req.To, "(last point)")},
		{"Per", per},
		{"Agg", agg},
		{"Fill", p.opts.Fill.String()},
		{"Mode", mode},
		{"Rows", sum.Rows},
		{"First date", formatDate(sum.First, p.intraday)},
		{"Last date", formatDate(sum.Last, p.intraday)},
		{"Chart", chart},
		{"Refresh formula", p.formula("ES.Get", false)},
		{"Exported by", "EnergyScope es export"},
	}
	r := len(p.ids) + 3
	for _, kv := range settings {
		if err := set("A"+strconv.Itoa(r), []any{kv[0], kv[1]}); err != nil {
			return err
		}
		if err := f.SetCellStyle(InfoSheet, "A"+strconv.Itoa(r), "A"+strconv.Itoa(r), bold); err != nil {
			return err
		}
		r++
	}
	widths := []float64{18, 30, 12, 10, 16, 14, 12, 12, 9, 15, 24, 8, 60}
	for i, w := range widths {
		c := colName(i + 1)
		if err := f.SetColWidth(InfoSheet, c, c, w); err != nil {
			return err
		}
	}
	return f.SetPanes(InfoSheet, &excelize.Panes{Freeze: true, YSplit: 1, TopLeftCell: "A2", ActivePane: "bottomLeft"})
}

func formatDate(t int64, intraday bool) string {
	u := time.Unix(t, 0).UTC()
	if intraday {
		return u.Format("2006-01-02 15:04")
	}
	return u.Format("2006-01-02")
}

// formula is the ES.Get call that computes the whole Data sheet below its header:
// the series are the header cells (a range of ids, so no id needs quoting and the
// 255-character limit of a text argument does not apply), then the dates and options
// as requested. name is how the function is written: udfName in the cell (inCell,
// as stored in the file, without "="), ES.Get in text for people (with "=" and the
// sheet name).
func (p *plan) formula(name string, inCell bool) string {
	ref := fmt.Sprintf("$B$1:$%s$1", colName(len(p.ids)+1))
	if !inCell {
		ref = DataSheet + "!" + ref
	}
	s := name + "(" + ref + p.formulaArgs() + ")"
	if !inCell {
		s = "=" + s
	}
	return s
}

// seriesFormula is the ES.Get call for series i alone, as text for the Info sheet.
func (p *plan) seriesFormula(i int) string {
	id := p.ids[i]
	arg := quote(id)
	if strings.Contains(id, ",") || len(id) > 255 {
		// A comma would split the id in text; a cell holds it whole.
		arg = fmt.Sprintf("%s!$%s$1", DataSheet, colName(i+2))
	}
	return "=ES.Get(" + arg + p.formulaArgs() + ")"
}

// formulaArgs are ", from, to, options..." as typed in the request, so that relative
// dates (-1Y, today) stay relative when the formula is recalculated. Trailing empty
// dates are left out.
func (p *plan) formulaArgs() string {
	var b strings.Builder
	from, to := strings.TrimSpace(p.req.From), strings.TrimSpace(p.req.To)
	var opts []string
	if p.opts.Per != 0 {
		opts = append(opts, "per="+string(p.opts.Per))
		if p.opts.Agg != functions.AggLast {
			opts = append(opts, "agg="+p.opts.Agg.String())
		}
	}
	if p.opts.Fill != functions.FillNone {
		opts = append(opts, "fill="+p.opts.Fill.String())
	}
	switch {
	case to != "":
		b.WriteString("," + quoteOrEmpty(from) + "," + quote(to))
	case from != "":
		b.WriteString("," + quote(from))
	case len(opts) > 0:
		// Options alone: ES.Get reads a key=value argument as options.
	}
	for _, o := range opts {
		b.WriteString("," + quote(o))
	}
	return b.String()
}

// quote writes s as an Excel text literal.
func quote(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

func quoteOrEmpty(s string) string {
	if s == "" {
		return ""
	}
	return quote(s)
}

func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// colName is the letters of a 1-based column number.
func colName(c int) string {
	var b [8]byte
	i := len(b)
	for c > 0 {
		c--
		i--
		b[i] = byte('A' + c%26)
		c /= 26
	}
	return string(b[i:])
}

func cellName(col, row int) string { return colName(col) + strconv.Itoa(row) }

// countWriter counts the bytes written through it.
type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
