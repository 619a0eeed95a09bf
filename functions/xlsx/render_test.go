package xlsx_test

import (
	"context"
	"fmt"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/energyscope/energyscope/functions/xlsx"
)

// chartCase is a workbook whose charts TestChartRender checks.
type chartCase struct {
	name   string
	req    xlsx.Request
	sheets []string // the chart sheets, in order
	// secondary: one chart with the second unit on a right-hand axis.
	secondary bool
	dateAxis  bool
	axisFmt   string
	title     string // in the first chart
	// lineless: LibreOffice draws no lines. It shows #NAME? for a formula it cannot
	// resolve (ES.GET), cached values or not, so a formulas workbook's chart is empty
	// there; Excel without the add-in shows the cached values.
	lineless bool
}

var chartCases = []chartCase{
	{name: "one-unit", req: xlsx.Request{Series: []string{"MSFT", "GOOG", "IBM"}, From: "2003", To: "2005"},
		sheets: []string{"Chart"}, dateAxis: true, axisFmt: "mmm yyyy", title: "MSFT, GOOG, IBM (USD)"},
	// Monthly prices and annual generation: two units, and an annual series among
	// monthly rows (11 blanks between its points) that must still be a line.
	{name: "two-units", req: xlsx.Request{Series: []string{"MSFT", "iowa:Fossil Fuels", "iowa:Renewables"}, From: "2001", To: "2009"},
		sheets: []string{"Chart"}, secondary: true, dateAxis: true, axisFmt: "mmm yyyy",
		title: "MSFT (USD) and iowa:Fossil Fuels, iowa:Renewables (thousand MWh, right axis)"},
	{name: "three-units", req: xlsx.Request{Series: []string{"MSFT", "iowa:Fossil Fuels", "SEA.temperature"}, From: "2001", To: "2012", Per: "M", Agg: "avg"},
		sheets: []string{"Chart USD", "Chart thousand MWh", "Chart no unit"}, dateAxis: true, axisFmt: "mmm yyyy", title: "MSFT (USD)"},
	{name: "intraday", req: xlsx.Request{Series: []string{"SEA.temperature", "SEA.wind"}, From: "2010-01-01", To: "2010-01-07"},
		sheets: []string{"Chart"}, axisFmt: "yyyy-mm-dd hh:mm", title: "SEA.temperature, SEA.wind"},
	{name: "formulas", req: xlsx.Request{Series: []string{"MSFT", "GOOG"}, From: "2004-01", To: "2004-06", Formulas: true},
		sheets: []string{"Chart"}, dateAxis: true, axisFmt: "yyyy-mm-dd", title: "MSFT, GOOG (USD)", lineless: true},
}

// TestChartRender exports workbooks with one, two and three units, intraday data and
// formulas; reads each chart's XML (date axis and its number format, blanks spanned,
// the secondary axis, dark legible axis text, titles with units), the value columns'
// number formats and widths; then renders every workbook through LibreOffice to PDF,
// one page per sheet, and Ghostscript to PNG, and checks that each chart page has
// lines drawn on it. The PNGs go to the test artifacts ($ES_ARTIFACTS or
// build/artifacts) for a person to look at.
func TestChartRender(t *testing.T) {
	src, st := sampleSource(t)
	dir := t.TempDir()
	paths := make([]string, len(chartCases))
	for i, c := range chartCases {
		c.req.Now = func() time.Time { return exportNow }
		c.req.Provenance = provenance(st)
		sum, err := xlsx.ExportFile(filepath.Join(dir, c.name+".xlsx"), src, c.req, nil)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		paths[i] = sum.Path
		checkChartXML(t, c, sum.Path)
	}
	checkColumns(t, paths[0])

	soffice, err := exec.LookPath("soffice")
	if err != nil {
		soffice, err = exec.LookPath("libreoffice")
	}
	needTool(t, "LibreOffice (soffice)", err == nil)
	gs, err := exec.LookPath("gs")
	needTool(t, "Ghostscript (gs)", err == nil)
	outDir, profile := t.TempDir(), t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	args := []string{"-env:UserInstallation=file://" + profile, "--headless", "--norestore",
		"--convert-to", `pdf:calc_pdf_Export:{"SinglePageSheets":{"type":"boolean","value":"true"}}`, "--outdir", outDir}
	cmd := exec.CommandContext(ctx, soffice, append(args, paths...)...)
	cmd.Env = append(os.Environ(), "HOME="+profile)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("soffice: %v\n%s", err, out)
	}
	art := filepath.Join("..", "..", "build", "artifacts")
	if d := os.Getenv("ES_ARTIFACTS"); d != "" {
		art = d
	}
	if err := os.MkdirAll(art, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range chartCases {
		pdf := filepath.Join(outDir, c.name+".pdf")
		// Pages: Data, the chart sheets, Info.
		first, last := 2, 1+len(c.sheets)
		pattern := filepath.Join(art, "xlsx-"+c.name+"-%d.png")
		out, err := exec.CommandContext(ctx, gs, "-q", "-dSAFER", "-dBATCH", "-dNOPAUSE", "-sDEVICE=png16m", "-r72",
			fmt.Sprintf("-dFirstPage=%d", first), fmt.Sprintf("-dLastPage=%d", last), "-o", pattern, pdf).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: gs: %v\n%s", c.name, err, out)
		}
		for i, sheet := range c.sheets {
			png := fmt.Sprintf(pattern, i+1)
			ink, colour := inkOf(t, png)
			t.Logf("%s %q: %s: %.1f%% ink, %.2f%% in colour", c.name, sheet, png, 100*ink, 100*colour)
			// Axes, labels and gridlines are ink; the series' lines are colour.
			if ink < 0.01 || (colour < 0.002 && !c.lineless) {
				t.Errorf("%s: chart sheet %q renders blank (%.2f%% ink, %.3f%% colour): %s", c.name, sheet, 100*ink, 100*colour, png)
			}
		}
	}
}

// checkChartXML reads the chart parts of one workbook.
func checkChartXML(t *testing.T, c chartCase, path string) {
	t.Helper()
	f := open(t, path)
	want := append(append([]string{xlsx.DataSheet}, c.sheets...), xlsx.InfoSheet)
	if got := f.GetSheetList(); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("%s: sheets %q, want %q", c.name, got, want)
	}
	for i := range c.sheets {
		x := part(t, path, fmt.Sprintf("xl/charts/chart%d.xml", i+1))
		must := []string{
			`<dispBlanksAs val="span">`,
			`<numFmt formatCode="` + c.axisFmt + `" sourceLinked="false">`,
			// Dates are numbers, not text categories.
			`<cat><numRef><f>Data!$A$2:`,
			// Axis text: dark and 10 pt.
			`sz="1000" u="none"><a:solidFill><a:srgbClr val="262626">`,
		}
		if c.dateAxis {
			must = append(must, `<dateAx>`, `<baseTimeUnit val="days">`)
		} else {
			must = append(must, `<catAx>`, `<tickLblSkip val=`)
		}
		if i == 0 {
			must = append(must, "<a:t>"+c.title+"</a:t>")
		}
		for _, s := range must {
			if !strings.Contains(x, s) {
				t.Errorf("%s chart %d lacks %s", c.name, i+1, s)
			}
		}
		for _, s := range []string{"<cat><strRef>", "<lblAlgn", "<noMultiLvlLbl"} {
			if c.dateAxis && strings.Contains(x, s) {
				t.Errorf("%s chart %d has %s", c.name, i+1, s)
			}
		}
		valAx := regexp.MustCompile(`<valAx>.*?</valAx>`).FindAllString(x, -1)
		if c.secondary {
			if len(valAx) != 2 || !strings.Contains(valAx[1], `<axPos val="r">`) || !strings.Contains(valAx[1], `<crosses val="max">`) ||
				!strings.Contains(valAx[1], "<a:t>thousand MWh</a:t>") || !strings.Contains(valAx[0], "<a:t>USD</a:t>") ||
				strings.Count(x, "<lineChart>") != 2 {
				t.Errorf("%s: no secondary axis: %d value axes", c.name, len(valAx))
			}
		} else if len(valAx) != 1 {
			t.Errorf("%s chart %d: %d value axes", c.name, i+1, len(valAx))
		}
	}
}

// checkColumns: value columns have a number format with the series' decimals and are
// wide enough for their ids.
func checkColumns(t *testing.T, path string) {
	f := open(t, path)
	for _, col := range []string{"B", "C", "D"} {
		if got := numFmt(t, f, xlsx.DataSheet, col+"30"); got != "#,##0.00" {
			t.Errorf("%s30 number format %q", col, got)
		}
		if w, err := f.GetColWidth(xlsx.DataSheet, col); err != nil || w < 8 {
			t.Errorf("column %s width %v %v", col, w, err)
		}
	}
}

// inkOf is the share of pixels in a PNG that are not near white, and of those in
// colour (not grey).
func inkOf(t *testing.T, path string) (ink, colour float64) {
	t.Helper()
	fh, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	img, err := png.Decode(fh)
	if err != nil {
		t.Fatal(err)
	}
	b := img.Bounds()
	var n, dark, col int
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			r, g, bl = r>>8, g>>8, bl>>8
			n++
			if r < 235 || g < 235 || bl < 235 {
				dark++
			}
			if max(r, g, bl)-min(r, g, bl) > 60 {
				col++
			}
		}
	}
	return float64(dark) / float64(n), float64(col) / float64(n)
}
