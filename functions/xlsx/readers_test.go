package xlsx_test

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"github.com/energyscope/energyscope/internal/testhome"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/energyscope/energyscope/functions/xlsx"
)

// Other readers of the workbooks: LibreOffice and openpyxl, the two a test machine
// can have (scripts/install-deps.sh installs libreoffice-calc and python3-openpyxl).
// Where CI=true they must run; elsewhere a missing tool skips the test.

func needTool(t *testing.T, what string, ok bool) {
	t.Helper()
	if ok {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s is missing and CI=true: run scripts/install-deps.sh", what)
	}
	t.Skipf("%s is not installed (scripts/install-deps.sh installs it)", what)
}

// readerFiles are the workbooks both readers check: values, formulas, intraday.
type readerFiles struct {
	values, formulas, intraday, na string
}

func writeReaderFiles(t *testing.T) readerFiles {
	src, st := sampleSource(t)
	dir := t.TempDir()
	var out readerFiles
	for _, c := range []struct {
		dst  *string
		name string
		req  xlsx.Request
	}{
		{&out.values, "values", xlsx.Request{Series: []string{"MSFT", "GOOG", "IBM"}, From: "2003", To: "2005"}},
		{&out.formulas, "formulas", xlsx.Request{Series: []string{"MSFT", "GOOG", "IBM"}, From: "2003", To: "2005", Formulas: true}},
		{&out.intraday, "intraday", xlsx.Request{Series: []string{"SEA.temperature", "SEA.wind"}, From: "2010-01-01", To: "2010-01-01"}},
		{&out.na, "na", xlsx.Request{Series: []string{"MSFT", "GOOG"}, From: "2004-06", To: "2004-09", Fill: "na"}},
	} {
		c.req.Provenance = provenance(st)
		c.req.Now = func() time.Time { return exportNow }
		sum, err := xlsx.ExportFile(filepath.Join(dir, c.name+".xlsx"), src, c.req, nil)
		if err != nil {
			t.Fatal(err)
		}
		*c.dst = sum.Path
	}
	return out
}

// TestLibreOffice converts the workbooks to CSV, one file per sheet, with LibreOffice
// and checks what it read: every value, the dates as formatted, the Info sheet. In
// formulas mode LibreOffice shows #NAME? across the array whatever the file asks:
// it recalculates any formula whose function it cannot resolve, where Excel without
// the add-in shows the cached values (no fullCalcOnLoad, a current calcId:
// TestExportFormulas, TestOpenpyxl).
func TestLibreOffice(t *testing.T) {
	soffice, err := exec.LookPath("soffice")
	if err != nil {
		soffice, err = exec.LookPath("libreoffice")
	}
	needTool(t, "LibreOffice (soffice)", err == nil)
	files := writeReaderFiles(t)
	outDir := t.TempDir()
	profile := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// Filter options: comma, double quote, UTF-8, from line 1, ..., cells as shown
	// (token 9), and token 12 = -1: every sheet to its own file NAME-SHEET.csv.
	cmd := exec.CommandContext(ctx, soffice, "-env:UserInstallation=file://"+profile, "--headless", "--norestore",
		"--convert-to", "csv:Text - txt - csv (StarCalc):44,34,76,1,,0,false,true,true,false,false,-1",
		"--outdir", outDir, files.values, files.formulas, files.intraday, files.na)
	cmd.Env = append(os.Environ(), "HOME="+profile)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("soffice: %v\n%s", err, out)
	}
	read := func(wb, sheet string) [][]string {
		t.Helper()
		name := strings.TrimSuffix(filepath.Base(wb), ".xlsx") + "-" + sheet + ".csv"
		f, err := os.Open(filepath.Join(outDir, name))
		if err != nil {
			t.Fatalf("%v\nsoffice said:\n%s", err, out)
		}
		defer f.Close()
		r := csv.NewReader(f)
		r.FieldsPerRecord = -1
		rows, err := r.ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		return rows
	}

	// Values: every cell against stocks.csv.
	prices := testhome.StockPrices(t, "2006-01-02")
	data := read(files.values, xlsx.DataSheet)
	if strings.Join(data[0], ",") != "Date,MSFT,GOOG,IBM" || len(data) != 37 {
		t.Fatalf("Data: header %v, %d rows", data[0], len(data))
	}
	for _, r := range data[1:] {
		for j, id := range []string{"MSFT", "GOOG", "IBM"} {
			v, ok := prices[id][r[0]]
			if (ok && !shows(r[j+1], v)) || (!ok && r[j+1] != "") {
				t.Fatalf("LibreOffice %s %s: %q, csv %v %v", id, r[0], r[j+1], v, ok)
			}
		}
	}
	info := read(files.values, xlsx.InfoSheet)
	if got := strings.Join(info[1][:9], "|"); got != "MSFT||USD|M|vega-datasets|stocks|2000-01-01|2010-03-01|123" {
		t.Fatalf("Info row 2: %s", got)
	}
	if info[1][12] != `=ES.Get("MSFT","2003","2005")` || !strings.HasPrefix(info[1][10], "e1-") {
		t.Fatalf("Info row 2: %q", info[1])
	}

	// Intraday: dates with times.
	intra := read(files.intraday, xlsx.DataSheet)
	if intra[1][0] != "2010-01-01 01:00" || intra[1][1] != "4.0" || intra[23][0] != "2010-01-01 23:00" || len(intra) != 24 {
		t.Fatalf("intraday: %q .. %q (%d rows)", intra[1], intra[len(intra)-1], len(intra))
	}
	// fill=na: =NA() cells, calculated on load, are #N/A (which charts skip).
	na := read(files.na, xlsx.DataSheet)
	if got := fmt.Sprint(na[1:]); got != "[[2004-06-01 23.44 #N/A] [2004-07-01 23.38 #N/A] [2004-08-01 22.47 102.37] [2004-09-01 22.76 129.60]]" {
		t.Fatalf("fill=na: %s", got)
	}

	// Formulas: LibreOffice opens the file and keeps the header; the array shows
	// #NAME? since no ES.GET exists there.
	fdata := read(files.formulas, xlsx.DataSheet)
	if strings.Join(fdata[0], ",") != "Date,MSFT,GOOG,IBM" || len(fdata) != 37 {
		t.Fatalf("formulas Data: header %v, %d rows", fdata[0], len(fdata))
	}
	t.Logf("LibreOffice shows the formulas workbook's A2 as %q (no add-in)", fdata[1][0])
}

// inspection is what testdata/inspect_xlsx.py prints.
type inspection struct {
	Sheets []string `json:"sheets"`
	Charts []struct {
		Sheet  string              `json:"sheet"`
		Type   string              `json:"type"`
		Series []map[string]string `json:"series"`
	} `json:"charts"`
	Tables []struct {
		Name    string   `json:"name"`
		Ref     string   `json:"ref"`
		Columns []string `json:"columns"`
	} `json:"tables"`
	FreezePanes          string   `json:"freeze_panes"`
	MaxRow               int      `json:"max_row"`
	MaxColumn            int      `json:"max_column"`
	DateFormats          []string `json:"date_formats"`
	DateIsDate           bool     `json:"date_is_date"`
	Data                 [][]any  `json:"data"`
	A2                   any      `json:"a2"`
	Info                 [][]any  `json:"info"`
	Parts                []string `json:"parts"`
	A2Raw                string   `json:"a2_raw"`
	Metadata             string   `json:"metadata"`
	CalcPr               string   `json:"calc_pr"`
	ContentTypesMetadata bool     `json:"content_types_metadata"`
}

// pythonWithOpenpyxl finds a python3 that imports openpyxl: Debian's first, since
// python3-openpyxl installs there and a python3 earlier on PATH may lack it.
func pythonWithOpenpyxl() string {
	for _, py := range []string{"/usr/bin/python3", "python3"} {
		if exec.Command(py, "-c", "import openpyxl").Run() == nil {
			return py
		}
	}
	return ""
}

func inspect(t *testing.T, py, path string) inspection {
	t.Helper()
	out, err := exec.Command(py, filepath.Join("testdata", "inspect_xlsx.py"), path).Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("inspect_xlsx.py: %v\n%s", err, ee.Stderr)
		}
		t.Fatal(err)
	}
	var in inspection
	if err := json.Unmarshal(out, &in); err != nil {
		t.Fatalf("%v: %.500s", err, out)
	}
	return in
}

// TestOpenpyxl reads the workbooks with openpyxl: sheets, table, chart, panes, date
// formats, values and the Info sheet; and the raw parts of the formulas workbook.
func TestOpenpyxl(t *testing.T) {
	py := pythonWithOpenpyxl()
	needTool(t, "python3 with openpyxl", py != "")
	files := writeReaderFiles(t)
	prices := testhome.StockPrices(t, "2006-01-02")

	v := inspect(t, py, files.values)
	if strings.Join(v.Sheets, ",") != "Data,Chart,Info" {
		t.Fatalf("sheets %v", v.Sheets)
	}
	if len(v.Tables) != 1 || v.Tables[0].Name != "ESData" || v.Tables[0].Ref != "A1:D37" ||
		strings.Join(v.Tables[0].Columns, ",") != "Date,MSFT,GOOG,IBM" {
		t.Fatalf("tables %+v", v.Tables)
	}
	if len(v.Charts) != 1 || v.Charts[0].Type != "lineChart" || v.Charts[0].Sheet != "Chart" || len(v.Charts[0].Series) != 3 {
		t.Fatalf("charts %+v", v.Charts)
	}
	if s := v.Charts[0].Series[1]; s["values"] != "Data!$C$2:$C$37" || s["categories"] != "Data!$A$2:$A$37" || s["name"] != "Data!$C$1" {
		t.Fatalf("chart series %v", s)
	}
	if v.FreezePanes != "B2" || v.MaxRow != 37 || v.MaxColumn != 4 {
		t.Fatalf("panes %q, %dx%d", v.FreezePanes, v.MaxRow, v.MaxColumn)
	}
	if strings.Join(v.DateFormats, ",") != "yyyy-mm-dd" || !v.DateIsDate {
		t.Fatalf("date formats %v, is date %v", v.DateFormats, v.DateIsDate)
	}
	for i, r := range v.Data[1:] {
		d, _ := r[0].(string)
		for j, id := range []string{"MSFT", "GOOG", "IBM"} {
			want, ok := prices[id][d]
			got, isNum := r[j+1].(float64)
			if ok != isNum || (ok && got != want) || (!ok && r[j+1] != nil) {
				t.Fatalf("row %d %s %s: %v, csv %v %v", i+2, id, d, r[j+1], want, ok)
			}
		}
	}
	row := fmt.Sprint(v.Info[3])
	if row != "[IBM  USD M vega-datasets stocks 2000-01-01 2010-03-01 123 36 "+fmt.Sprint(v.Info[3][10])+" 0 =ES.Get(\"IBM\",\"2003\",\"2005\")]" {
		t.Fatalf("Info row 4: %s", row)
	}
	if len(v.Parts) == 0 || v.Metadata != "" || v.A2Raw != "" {
		t.Fatalf("values workbook has formula parts: %q %q", v.A2Raw, v.Metadata)
	}

	f := inspect(t, py, files.formulas)
	if len(f.Tables) != 0 || len(f.Charts) != 1 || f.FreezePanes != "B2" {
		t.Fatalf("formulas workbook: tables %v charts %d panes %q", f.Tables, len(f.Charts), f.FreezePanes)
	}
	if f.A2 != `=_xldudf_ES_GET($B$1:$D$1,"2003","2005")` {
		// openpyxl 3.1 and later read an array formula as an object.
		if m, ok := f.A2.(map[string]any); !ok || m["array_formula"] != `=_xldudf_ES_GET($B$1:$D$1,"2003","2005")` {
			t.Fatalf("A2 %v", f.A2)
		}
	}
	if f.A2Raw != `<c r="A2" s="1" cm="1"><f t="array" ref="A2:D37">` || !strings.Contains(f.Metadata, `fDynamic="1"`) ||
		!f.ContentTypesMetadata || strings.Contains(f.CalcPr, `fullCalcOnLoad`) || !strings.Contains(f.CalcPr, `calcId="191029"`) {
		t.Fatalf("formulas parts: %q, metadata %q, content types %v, calcPr %q", f.A2Raw, f.Metadata, f.ContentTypesMetadata, f.CalcPr)
	}
	// The cached result is the exported data.
	if fmt.Sprint(f.Data[1]) != fmt.Sprint(v.Data[1]) || fmt.Sprint(f.Data[36]) != fmt.Sprint(v.Data[36]) {
		t.Fatalf("cached values %v vs %v", f.Data[1], v.Data[1])
	}

	h := inspect(t, py, files.intraday)
	if strings.Join(h.DateFormats, ",") != "yyyy-mm-dd hh:mm" || h.Data[1][0] != "2010-01-01T01:00" {
		t.Fatalf("intraday: formats %v, first %v", h.DateFormats, h.Data[1])
	}
}
