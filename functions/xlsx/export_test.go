package xlsx_test

import (
	"archive/zip"
	"bytes"
	"errors"
	"github.com/energyscope/energyscope/internal/testhome"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/xuri/excelize/v2"

	"github.com/energyscope/energyscope/functions"
	"github.com/energyscope/energyscope/functions/xlsx"
	"github.com/energyscope/energyscope/localcache"
)

// exportNow is the export time in tests.
var exportNow = time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)

func provenance(st *localcache.Store) func(string) (string, uint64) {
	return func(id string) (string, uint64) {
		in, err := st.Info(id)
		if err != nil {
			return "", 0
		}
		return in.SnapshotID, in.Seq
	}
}

// export writes req from the sample store to a file in a fresh directory.
func export(t *testing.T, src functions.Source, req xlsx.Request) (string, xlsx.Summary) {
	t.Helper()
	if req.Now == nil {
		req.Now = func() time.Time { return exportNow }
	}
	path := filepath.Join(t.TempDir(), "out.xlsx")
	var calls, last int
	sum, err := xlsx.ExportFile(path, src, req, func(done, total int) {
		calls++
		if done < last || done > total {
			t.Errorf("progress %d/%d after %d", done, total, last)
		}
		last = done
	})
	if err != nil {
		t.Fatalf("export %+v: %v", req, err)
	}
	if calls == 0 || last != sum.Rows {
		t.Fatalf("progress: %d calls, last %d, rows %d", calls, last, sum.Rows)
	}
	st, err := os.Stat(path)
	if err != nil || st.Size() != sum.Bytes || sum.Path != path {
		t.Fatalf("summary %+v vs file %v %v", sum, st, err)
	}
	// Readable by the group and others: a workbook is made to be shared.
	if runtime.GOOS != "windows" && st.Mode().Perm() != 0o644 {
		t.Fatalf("workbook mode %v, want 0644", st.Mode().Perm())
	}
	onlyFile(t, filepath.Dir(path), "out.xlsx")
	return path, sum
}

// onlyFile fails unless dir holds exactly the named files (no temp files left).
func onlyFile(t *testing.T, dir string, names ...string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range ents {
		got = append(got, e.Name())
	}
	if strings.Join(got, ",") != strings.Join(names, ",") {
		t.Fatalf("%s holds %v, want %v", dir, got, names)
	}
}

func open(t *testing.T, path string) *excelize.File {
	t.Helper()
	f, err := excelize.OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// part returns one part of the package.
// partOrEmpty is part, with "" for a part the package does not have.
func partOrEmpty(t *testing.T, path, name string) string {
	t.Helper()
	z, err := zip.OpenReader(path)
	if err != nil {
		t.Fatal(err)
	}
	defer z.Close()
	for _, f := range z.File {
		if f.Name == name {
			z.Close()
			return part(t, path, name)
		}
	}
	return ""
}

func part(t *testing.T, path, name string) string {
	t.Helper()
	z, err := zip.OpenReader(path)
	if err != nil {
		t.Fatal(err)
	}
	defer z.Close()
	for _, f := range z.File {
		if f.Name == name {
			r, err := f.Open()
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			b, err := io.ReadAll(r)
			if err != nil {
				t.Fatal(err)
			}
			return string(b)
		}
	}
	return ""
}

// numFmt is the custom number format of a cell.
func numFmt(t *testing.T, f *excelize.File, sheet, cell string) string {
	t.Helper()
	id, err := f.GetCellStyle(sheet, cell)
	if err != nil {
		t.Fatal(err)
	}
	st, err := f.GetStyle(id)
	if err != nil {
		t.Fatal(err)
	}
	if st.CustomNumFmt == nil {
		return ""
	}
	return *st.CustomNumFmt
}

func fmtFloat(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// shows reports whether cell, a value as a reader shows it (a number format with
// thousands separators and a fixed count of decimals), is v.
func shows(cell string, v float64) bool {
	g, err := strconv.ParseFloat(strings.ReplaceAll(cell, ",", ""), 64)
	return err == nil && g == v
}

// TestExportStocks exports three real series over a range where one starts late and
// checks every cell against stocks.csv, then the table, panes, formats, chart and Info.
func TestExportStocks(t *testing.T) {
	src, st := sampleSource(t)
	ids := []string{"MSFT", "GOOG", "IBM"}
	path, sum := export(t, src, xlsx.Request{Series: ids, From: "2003", To: "2005", Provenance: provenance(st)})
	prices := testhome.StockPrices(t, "2006-01-02")
	if sum.Series != 3 || sum.Rows != 36 || sum.Charted != 3 {
		t.Fatalf("summary %+v", sum)
	}
	f := open(t, path)
	if got := strings.Join(f.GetSheetList(), ","); got != "Data,Chart,Info" {
		t.Fatalf("sheets %s", got)
	}
	rows, err := f.GetRows(xlsx.DataSheet)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(rows[0], ",") != "Date,MSFT,GOOG,IBM" || len(rows) != 37 {
		t.Fatalf("header %v, %d rows", rows[0], len(rows))
	}
	cells := 0
	for i, r := range rows[1:] {
		d := r[0]
		want := time.Date(2003, time.Month(1+i), 1, 0, 0, 0, 0, time.UTC).Format("2006-01-02")
		if d != want {
			t.Fatalf("row %d date %q, want %q", i+2, d, want)
		}
		for j, id := range ids {
			got := ""
			if j+1 < len(r) {
				got = r[j+1]
			}
			v, ok := prices[id][d]
			if (ok && !shows(got, v)) || (!ok && got != "") {
				t.Fatalf("%s %s: cell %q, csv %v %v", id, d, got, v, ok)
			}
			if ok {
				cells++
			}
		}
	}
	if cells != sum.Cells || cells != 36+36+17 {
		t.Fatalf("%d value cells, summary %d", cells, sum.Cells)
	}
	// The date cells are numbers (serials) in a date format.
	raw, err := f.GetCellValue(xlsx.DataSheet, "A2", excelize.Options{RawCellValue: true})
	if err != nil || raw != "37622" {
		t.Fatalf("A2 raw %q %v", raw, err)
	}
	if got := numFmt(t, f, xlsx.DataSheet, "A37"); got != "yyyy-mm-dd" {
		t.Fatalf("date format %q", got)
	}
	tables, err := f.GetTables(xlsx.DataSheet)
	if err != nil || len(tables) != 1 || tables[0].Name != xlsx.TableName || tables[0].Range != "A1:D37" {
		t.Fatalf("tables %+v %v", tables, err)
	}
	panes, err := f.GetPanes(xlsx.DataSheet)
	if err != nil || !panes.Freeze || panes.YSplit != 1 || panes.TopLeftCell != "B2" {
		t.Fatalf("panes %+v %v", panes, err)
	}
	chart := part(t, path, "xl/charts/chart1.xml")
	if !strings.Contains(chart, "<lineChart>") || strings.Count(chart, "<ser>") != 3 ||
		!strings.Contains(chart, "<f>Data!$C$2:$C$37</f>") || !strings.Contains(chart, `<dispBlanksAs val="span"`) {
		t.Fatalf("chart part: %.600s", chart)
	}

	info, err := f.GetRows(xlsx.InfoSheet)
	if err != nil {
		t.Fatal(err)
	}
	if info[0][0] != "Series" || info[0][12] != "Formula" {
		t.Fatalf("info header %v", info[0])
	}
	for i, id := range ids {
		r := info[i+1]
		in, err := st.Info(id)
		if err != nil {
			t.Fatal(err)
		}
		want := []string{id, in.Name, "USD", "M", "vega-datasets", "stocks",
			time.Unix(in.First, 0).UTC().Format("2006-01-02"), "2010-03-01", strconv.Itoa(in.Count), "", in.SnapshotID, "0",
			`=ES.Get("` + id + `","2003","2005")`}
		r = append(r, make([]string, len(want))...)[:len(want)]
		want[9] = r[9]
		if strings.Join(r, "|") != strings.Join(want, "|") || in.SnapshotID == "" {
			t.Fatalf("info row %d:\n got %q\nwant %q", i+2, r, want)
		}
	}
	if info[2][9] != "17" || info[1][9] != "36" {
		t.Fatalf("points exported %q %q", info[1][9], info[2][9])
	}
	settings := map[string]string{}
	for _, r := range info[len(ids)+1:] {
		if len(r) >= 2 {
			settings[r[0]] = r[1]
		}
	}
	for k, v := range map[string]string{
		"Exported at": "2024-05-06 07:08:09 UTC", "From": "2003", "To": "2005", "Per": "as stored", "Fill": "none",
		"Mode": "values", "Rows": "36", "First date": "2003-01-01", "Last date": "2005-12-01",
		"Refresh formula": `=ES.Get(Data!$B$1:$D$1,"2003","2005")`,
	} {
		if settings[k] != v {
			t.Errorf("info %s = %q, want %q", k, settings[k], v)
		}
	}
	// Nothing in this mode asks for recalculation, nor for the add-in's refresh.
	if wb := part(t, path, "xl/workbook.xml"); strings.Contains(wb, "fullCalcOnLoad") {
		t.Fatalf("values mode sets fullCalcOnLoad: %s", wb)
	}
	if custom := partOrEmpty(t, path, "docProps/custom.xml"); strings.Contains(custom, xlsx.RefreshProperty) {
		t.Fatalf("values mode asks the add-in to refresh: %s", custom)
	}
}

// TestExportAllStocks exports every stock over all its dates: every CSV point is a
// cell and no cell is not a CSV point.
func TestExportAllStocks(t *testing.T) {
	src, _ := sampleSource(t)
	prices := testhome.StockPrices(t, "2006-01-02")
	ids := []string{"AAPL", "AMZN", "GOOG", "IBM", "MSFT"}
	path, sum := export(t, src, xlsx.Request{Series: ids})
	f := open(t, path)
	rows, err := f.GetRows(xlsx.DataSheet)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range rows[1:] {
		for j, id := range ids {
			if j+1 < len(r) && r[j+1] != "" {
				if !shows(r[j+1], prices[id][r[0]]) {
					t.Fatalf("%s %s: %s vs %v", id, r[0], r[j+1], prices[id][r[0]])
				}
				n++
			}
		}
	}
	total := 0
	for _, m := range prices {
		total += len(m)
	}
	if n != total || sum.Cells != total {
		t.Fatalf("%d cells, summary %d, csv %d points", n, sum.Cells, total)
	}
}

// TestExportMatchesGet: with re-sampling and fill, the Data sheet is what ES.Get
// spills for the same arguments.
func TestExportMatchesGet(t *testing.T) {
	src, _ := sampleSource(t)
	for _, c := range []struct {
		ids                      []string
		from, to, per, agg, fill string
	}{
		{[]string{"MSFT", "GOOG", "iowa:Fossil Fuels"}, "2000", "2010", "A", "avg", "prev"},
		{[]string{"AAPL", "AMZN"}, "-5Y", "", "Q", "max", ""},
		{[]string{"SEA.temperature", "SEA.wind"}, "2010-07", "2010-07", "W", "min", "none"},
	} {
		path, sum := export(t, src, xlsx.Request{Series: c.ids, From: c.from, To: c.to, Per: c.per, Agg: c.agg, Fill: c.fill,
			Now: func() time.Time { return time.Date(2010, 3, 15, 0, 0, 0, 0, time.UTC) }})
		eng := &functions.Engine{Src: src, Now: func() time.Time { return time.Date(2010, 3, 15, 0, 0, 0, 0, time.UTC) }}
		r := eng.Call("ES.Get", []any{strings.Join(c.ids, ","), c.from, c.to, "per=" + c.per, "agg=" + c.agg, "fill=" + orNone(c.fill)})
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		f := open(t, path)
		if sum.Rows != len(r.Value) {
			t.Fatalf("%v: %d rows, ES.Get %d", c.ids, sum.Rows, len(r.Value))
		}
		for i, want := range r.Value {
			for j, w := range want {
				cell, _ := excelize.CoordinatesToCellName(j+1, i+2)
				got, err := f.GetCellValue(xlsx.DataSheet, cell, excelize.Options{RawCellValue: true})
				if err != nil {
					t.Fatal(err)
				}
				ws := ""
				if w != nil {
					ws = fmtFloat(w.(float64))
				}
				if g, err1 := strconv.ParseFloat(got, 64); err1 == nil && w != nil {
					if d := g - w.(float64); d > 1e-9 || d < -1e-9 {
						t.Fatalf("%v %s: %s, ES.Get %s", c.ids, cell, got, ws)
					}
				} else if got != ws {
					t.Fatalf("%v %s: %q, ES.Get %q", c.ids, cell, got, ws)
				}
			}
		}
	}
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// TestExportIntraday: hourly data gets a date-and-time format.
func TestExportIntraday(t *testing.T) {
	src, _ := sampleSource(t)
	path, sum := export(t, src, xlsx.Request{Series: []string{"SEA.temperature", "SEA.pressure"}, From: "2010-01-01", To: "2010-01-02"})
	if sum.Rows != 47 { // hourly from 01:00 on the first day
		t.Fatalf("rows %d", sum.Rows)
	}
	f := open(t, path)
	if got := numFmt(t, f, xlsx.DataSheet, "A2"); got != "yyyy-mm-dd hh:mm" {
		t.Fatalf("format %q", got)
	}
	if v, _ := f.GetCellValue(xlsx.DataSheet, "A2"); v != "2010-01-01 01:00" {
		t.Fatalf("A2 %q", v)
	}
	if v, _ := f.GetCellValue(xlsx.DataSheet, "B2"); v != "4.0" {
		t.Fatalf("B2 %q", v)
	}
}

// TestExportFillNA: fill=na writes =NA() cells, which charts skip, and asks Excel to
// calculate them on open.
func TestExportFillNA(t *testing.T) {
	src, _ := sampleSource(t)
	path, _ := export(t, src, xlsx.Request{Series: []string{"MSFT", "GOOG"}, From: "2004-06", To: "2004-09", Fill: "na"})
	f := open(t, path)
	if fm, _ := f.GetCellFormula(xlsx.DataSheet, "C2"); fm != "NA()" {
		t.Fatalf("C2 formula %q", fm)
	}
	if fm, _ := f.GetCellFormula(xlsx.DataSheet, "C4"); fm != "" {
		t.Fatalf("C4 formula %q", fm)
	}
	if wb := part(t, path, "xl/workbook.xml"); !strings.Contains(wb, `fullCalcOnLoad="true"`) {
		t.Fatalf("no fullCalcOnLoad: %s", wb)
	}
}

// TestExportFormulas: one dynamic array formula in A2, stored as Excel stores a call
// to an add-in's custom function, with the values as its cached result; no table.
func TestExportFormulas(t *testing.T) {
	src, _ := sampleSource(t)
	path, sum := export(t, src, xlsx.Request{Series: []string{"MSFT", "GOOG", "IBM"}, From: "2003", To: "-1Y", Per: "Q", Agg: "avg", Formulas: true,
		Now: func() time.Time { return time.Date(2006, 6, 15, 0, 0, 0, 0, time.UTC) }})
	if sum.Rows != 10 {
		t.Fatalf("rows %d", sum.Rows)
	}
	sheet := part(t, path, "xl/worksheets/sheet1.xml")
	want := `<c r="A2" s="1" cm="1"><f t="array" ref="A2:D11">_xldudf_ES_GET($B$1:$D$1,&#34;2003&#34;,&#34;-1Y&#34;,&#34;per=Q&#34;,&#34;agg=avg&#34;)</f><v>37622</v></c>`
	if !strings.Contains(sheet, want) {
		i := strings.Index(sheet, `<c r="A2"`)
		t.Fatalf("anchor cell:\n got %.300s\nwant %s", sheet[max(i, 0):], want)
	}
	if n := strings.Count(sheet, "<f"); n != 1 {
		t.Fatalf("%d formulas", n)
	}
	if !regexp.MustCompile(`<c r="C11" s="\d+"><v>`).MatchString(sheet) {
		t.Fatal("no cached values in the spill range")
	}
	if strings.Contains(sheet, "tablePart") {
		t.Fatal("a table in formulas mode")
	}
	meta := part(t, path, "xl/metadata.xml")
	for _, s := range []string{`<metadataType name="XLDAPR"`, `fDynamic="1"`, `<rc t="1" v="0"/>`} {
		if !strings.Contains(meta, s) {
			t.Fatalf("metadata.xml lacks %s: %s", s, meta)
		}
	}
	if ct := part(t, path, "[Content_Types].xml"); !strings.Contains(ct, `PartName="/xl/metadata.xml" ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sheetMetadata+xml"`) {
		t.Fatalf("content types: %s", ct)
	}
	rels := part(t, path, "xl/_rels/workbook.xml.rels")
	if !regexp.MustCompile(`<Relationship Id="rId7" Type="[^"]*/sheetMetadata" Target="metadata.xml"/>`).MatchString(rels) {
		t.Fatalf("rels: %s", rels)
	}
	// No recalculation forced on open: without the add-in Excel shows the cached
	// values instead of #NAME?; calcId is current Excel's, as an older one makes
	// Excel recalculate everything on open.
	if wb := part(t, path, "xl/workbook.xml"); strings.Contains(wb, "fullCalcOnLoad") || !strings.Contains(wb, `<calcPr calcId="191029"`) {
		t.Fatalf("calcPr: %s", wb)
	}
	// ... and asks the add-in, when it runs there, to refresh it.
	if custom := part(t, path, "docProps/custom.xml"); !strings.Contains(custom, `name="`+xlsx.RefreshProperty+`"`) || !strings.Contains(custom, ">formulas<") {
		t.Fatalf("docProps/custom.xml lacks the refresh property: %s", custom)
	}
	// excelize still reads it (a strict reader of the package).
	f := open(t, path)
	fm, err := f.GetCellFormula(xlsx.DataSheet, "A2")
	if err != nil || fm != `_xldudf_ES_GET($B$1:$D$1,"2003","-1Y","per=Q","agg=avg")` {
		t.Fatalf("A2 formula %q %v", fm, err)
	}
	info, _ := f.GetRows(xlsx.InfoSheet)
	found := false
	for _, r := range info {
		if len(r) > 1 && r[0] == "Refresh formula" {
			found = r[1] == `=ES.Get(Data!$B$1:$D$1,"2003","-1Y","per=Q","agg=avg")`
		}
	}
	if !found {
		t.Fatalf("info: %q", info)
	}
}

// TestExportWriter: Export to any writer, read back from memory.
func TestExportWriter(t *testing.T) {
	src, _ := sampleSource(t)
	var buf bytes.Buffer
	sum, err := xlsx.Export(&buf, src, xlsx.Request{Series: []string{"iowa:Renewables"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if int64(buf.Len()) != sum.Bytes || sum.Rows != 17 {
		t.Fatalf("summary %+v, %d bytes", sum, buf.Len())
	}
	f, err := excelize.OpenReader(&buf)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if v, _ := f.GetCellValue(xlsx.DataSheet, "B1"); v != "iowa:Renewables" {
		t.Fatalf("B1 %q", v)
	}
	if v, _ := f.GetCellValue(xlsx.DataSheet, "A18"); v != "2017-01-01" {
		t.Fatalf("A18 %q", v)
	}
}

// TestExportManySeries: more series than a chart plots, repeated ids and an id that
// would clash with the date column.
func TestExportManySeries(t *testing.T) {
	src, ids := synthDaily(300, 10)
	src.add("date", functions.SeriesInfo{Frequency: "D"}, []int64{1420070400}, []float64{1})
	req := append([]string{"date"}, ids...)
	req = append(req, " S001 ", "", "S002")
	path, sum := export(t, src, xlsx.Request{Series: req})
	if sum.Series != 301 || sum.Charted != xlsx.MaxChartSeries {
		t.Fatalf("summary %+v", sum)
	}
	f := open(t, path)
	if v, _ := f.GetCellValue(xlsx.DataSheet, "B1"); v != "date (2)" {
		t.Fatalf("B1 %q", v)
	}
	if v, _ := f.GetCellValue(xlsx.DataSheet, "KP1"); v != "S299" {
		t.Fatalf("KP1 %q", v)
	}
	if n := strings.Count(part(t, path, "xl/charts/chart1.xml"), "<ser>"); n != xlsx.MaxChartSeries {
		t.Fatalf("%d chart series", n)
	}
	tables, _ := f.GetTables(xlsx.DataSheet)
	if len(tables) != 1 || tables[0].Range != "A1:KP11" {
		t.Fatalf("tables %+v", tables)
	}
	info, _ := f.GetRows(xlsx.InfoSheet)
	ok := false
	for _, r := range info {
		if len(r) > 1 && r[0] == "Chart" {
			ok = r[1] == "the first 255 of 301 series (an Excel chart plots at most 255), MWh on the right-hand axis"
		}
	}
	if !ok {
		t.Fatal("Info does not say the chart is cut")
	}
}

// TestExportBadInput: every bad request fails with a clear message and leaves the
// directory as it was: no temp file, and an existing workbook untouched.
func TestExportBadInput(t *testing.T) {
	src, _ := sampleSource(t)
	dir := t.TempDir()
	existing := filepath.Join(dir, "keep.xlsx")
	if err := os.WriteFile(existing, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		path string
		req  xlsx.Request
		want string
		is   error
	}{
		{"unknown", existing, xlsx.Request{Series: []string{"NOPE", "MSFT", "NADA"}}, `unknown series "NOPE", "NADA"`, functions.ErrNotFound},
		{"empty range", existing, xlsx.Request{Series: []string{"MSFT", "IBM"}, From: "2030"}, "no data for MSFT,IBM on or after 2030-01-01", functions.ErrNoData},
		{"no series", existing, xlsx.Request{Series: []string{" ", ""}}, "no series given", xlsx.ErrRequest},
		{"bad date", existing, xlsx.Request{Series: []string{"MSFT"}, To: "2020-13"}, `to: cannot read date "2020-13"`, xlsx.ErrRequest},
		{"from after to", existing, xlsx.Request{Series: []string{"MSFT"}, From: "2005", To: "2004"}, "from 2005 is after to 2004", xlsx.ErrRequest},
		{"bad per", existing, xlsx.Request{Series: []string{"MSFT"}, Per: "X"}, "option per=X: want D, W, M, Q or A", xlsx.ErrRequest},
		{"agg without per", existing, xlsx.Request{Series: []string{"MSFT"}, Agg: "avg"}, "option agg=avg: needs per=", xlsx.ErrRequest},
		{"bad fill", existing, xlsx.Request{Series: []string{"MSFT"}, Fill: "often"}, "option fill=often: want none, prev, na or zero", xlsx.ErrRequest},
		{"not xlsx", filepath.Join(dir, "out.csv"), xlsx.Request{Series: []string{"MSFT"}}, "the name must end in .xlsx", xlsx.ErrRequest},
		{"under a file", "/etc/hostname/x.xlsx", xlsx.Request{Series: []string{"MSFT"}}, "/etc/hostname is a file, not a directory", nil},
		{"under a file, deeper", filepath.Join(existing, "a", "x.xlsx"), xlsx.Request{Series: []string{"MSFT"}}, existing + " is a file, not a directory", nil},
		{"missing dir", filepath.Join(dir, "no", "x.xlsx"), xlsx.Request{Series: []string{"MSFT"}}, "directory " + filepath.Join(dir, "no") + " does not exist", nil},
		{"a directory", filepath.Join(dir, "d.xlsx"), xlsx.Request{Series: []string{"MSFT"}}, "is a directory", nil},
	} {
		if c.name == "a directory" {
			if err := os.Mkdir(c.path, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		_, err := xlsx.ExportFile(c.path, src, c.req, nil)
		if err == nil || !strings.Contains(err.Error(), c.want) || (c.is != nil && !errors.Is(err, c.is)) {
			t.Errorf("%s: error %v, want %q (%v)", c.name, err, c.want, c.is)
		}
		if c.name == "a directory" {
			os.Remove(c.path)
		}
		onlyFile(t, dir, "keep.xlsx")
		if b, _ := os.ReadFile(existing); string(b) != "old" {
			t.Fatalf("%s: existing file changed", c.name)
		}
	}
}

// TestExportWriteFailure: a failure while writing (here a source that breaks after
// the checks) removes the temp file and leaves the old workbook.
func TestExportWriteFailure(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.xlsx")
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := xlsx.ExportFile(path, brokenSource{}, xlsx.Request{Series: []string{"X"}}, nil)
	if err == nil || !strings.Contains(err.Error(), "disk on fire") {
		t.Fatalf("error %v", err)
	}
	onlyFile(t, dir, "out.xlsx")
	if b, _ := os.ReadFile(path); string(b) != "old" {
		t.Fatal("old workbook changed")
	}
	// A progress callback that panics must not leave a temp file either.
	src, _ := sampleSource(t)
	func() {
		defer func() { recover() }()
		xlsx.ExportFile(path, src, xlsx.Request{Series: []string{"MSFT"}}, func(int, int) { panic("boom") })
	}()
	onlyFile(t, dir, "out.xlsx")
}

// brokenSource knows series X but fails to read it.
type brokenSource struct{}

func (brokenSource) Info(id string) (functions.SeriesInfo, error) {
	return functions.SeriesInfo{ID: id}, nil
}
func (brokenSource) Get(string, int64, int64) ([]int64, []float64, error) {
	return nil, nil, errors.New("disk on fire")
}
func (brokenSource) Search(string, int) ([]functions.SeriesInfo, error) { return nil, nil }

// TestExportReplaces: a second export replaces the first in place.
func TestExportReplaces(t *testing.T) {
	src, _ := sampleSource(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "out.xlsx")
	for _, id := range []string{"MSFT", "IBM"} {
		if _, err := xlsx.ExportFile(path, src, xlsx.Request{Series: []string{id}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	onlyFile(t, dir, "out.xlsx")
	f := open(t, path)
	if v, _ := f.GetCellValue(xlsx.DataSheet, "B1"); v != "IBM" {
		t.Fatalf("B1 %q", v)
	}
}
