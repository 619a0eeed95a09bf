package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/xuri/excelize/v2"
)

func TestExportCommand(t *testing.T) {
	home := t.TempDir()
	mustES(t, "cook", "--home", home, "--dataset", "stocks", "--in", "../../server/cook/samples/stocks.csv",
		"--series-col", "symbol", "--period-col", "date", "--value-col", "price")
	dir := t.TempDir()
	out := filepath.Join(dir, "stocks.xlsx")
	got := mustES(t, "export", "--home", home, "--out", out, "MSFT", "stocks:IBM", "--from", "2000", "--to", "2001", "--per", "Q", "--agg", "avg")
	if !strings.HasPrefix(got, "exported 2 series x 8 dates (2000-01-01 .. 2001-10-01, values) to "+out) {
		t.Fatalf("output %q", got)
	}
	f, err := excelize.OpenFile(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := f.GetRows("Data")
	if err != nil {
		t.Fatal(err)
	}
	// MSFT 2000 Q1: the mean of 39.81, 36.35 and 43.22.
	if len(rows) != 9 || strings.Join(rows[0], ",") != "Date,MSFT,stocks:IBM" || rows[1][0] != "2000-01-01" || !strings.HasPrefix(rows[1][1], "39.79333") {
		t.Fatalf("rows %q", rows)
	}
	info, _ := f.GetRows("Info")
	if len(info) < 3 || info[1][5] != "stocks" || !strings.HasPrefix(info[1][10], "e1-") {
		t.Fatalf("info %q", info)
	}

	mustES(t, "export", "--home", home, "--out", out, "--formulas", "MSFT")
	if fm, _ := func() (string, error) {
		g, err := excelize.OpenFile(out)
		if err != nil {
			return "", err
		}
		defer g.Close()
		return g.GetCellFormula("Data", "A2")
	}(); fm != "_xldudf_ES_GET($B$1:$B$1)" {
		t.Fatalf("formula %q", fm)
	}

	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"NOPE", "MSFT"}, 1, `unknown series "NOPE"`},
		{[]string{"MSFT", "--from", "2030"}, 1, "no data for MSFT on or after 2030-01-01"},
		{[]string{"MSFT", "--per", "X"}, 2, "option per=X"},
		{[]string{"MSFT", "--from", "soon"}, 2, `from: cannot read date "soon"`},
		{[]string{"--out", "/etc/hostname/x.xlsx", "MSFT"}, 1, "/etc/hostname is a file, not a directory"},
		{[]string{"--out", filepath.Join(dir, "x.csv"), "MSFT"}, 2, "must end in .xlsx"},
		{[]string{}, 2, "want at least one SERIES"},
	} {
		args := append([]string{"export", "--home", home}, c.args...)
		if !strings.Contains(strings.Join(c.args, " "), "--out") {
			args = append(args, "--out", out)
		}
		code, _, errs := es(t, args...)
		if code != c.code || !strings.Contains(errs, c.msg) {
			t.Errorf("es %v: exit %d, %q; want %d, %q", args, code, errs, c.code, c.msg)
		}
	}
	if code, _, errs := es(t, "export", "--home", home, "MSFT"); code != 2 || !strings.Contains(errs, "--out") {
		t.Errorf("no --out: exit %d %q", code, errs)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Fatalf("%d files left in %s", len(ents), dir)
	}
}
