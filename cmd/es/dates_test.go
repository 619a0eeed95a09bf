package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/energyscope/energyscope/functions"
	"github.com/energyscope/energyscope/internal/wiring"
	"github.com/energyscope/energyscope/localcache"
)

// cliNow is "today" for the date tests: Monday 2010-03-15, two weeks after the
// samples' last month.
var cliNow = time.Date(2010, 3, 15, 10, 0, 0, 0, time.UTC)

// esAt runs a command in-process with the clock at cliNow.
func esAt(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(&env{stdout: &out, stderr: &errb, now: func() time.Time { return cliNow }}, args)
	return code, out.String(), errb.String()
}

// stocksHome cooks the monthly stock prices sample into a fresh home.
func stocksHome(t *testing.T) string {
	t.Helper()
	home := t.TempDir()
	mustES(t, "cook", "--home", home, "--dataset", "stocks", "--in", "../../server/cook/samples/stocks.csv",
		"--series-col", "symbol", "--period-col", "date", "--value-col", "price")
	return home
}

// TestCLIDatesMatchESGet: es get and ES.Get read the same date arguments
// into the same rows, over a table of the grammar's forms.
func TestCLIDatesMatchESGet(t *testing.T) {
	home := stocksHome(t)
	st, err := localcache.Open(home, &localcache.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	eng := &functions.Engine{Src: wiring.Source{Store: st}, Now: func() time.Time { return cliNow }}
	for _, c := range []struct {
		from, to string
		rows     int // how many rows both must give (a guard against both being empty)
	}{
		{"2005Q1", "2005Q2", 6},
		{"2005-Q1", "2005-Q1", 3},
		{"2005 Q3", "2005q4", 6},
		{"2005", "2005", 12},
		{"2005", "2006", 24},
		{"2005-03", "2005-05", 3},
		{"200503", "200505", 3},
		{"2005M03", "2005M05", 3},
		{"2005-03-01", "2005-03-01", 1},
		{"2005-02-15", "2005-04-15", 2},
		{"20050215", "20050415", 2},
		{"Mar 2005", "May 2005", 3},
		{"2005-03-01T00:00", "2005-05-01T00:00:00Z", 3},
		{"38412", "38473", 3}, // Excel serials of 2005-03-01 and 2005-05-01
		{"38412.5", "38473", 2},
		{"-1Y", "", 12}, // 2009-03-15 ..: 2009-04 .. 2010-03
		{"-6M", "-1M", 5},
		{"-10D", "", 0},
		{"-100D", "-10D", 3},
		{"ytd", "", 3}, // 2010-01-01 ..: Jan, Feb, Mar
		{"today", "", 0},
		{"", "2000-03", 3},
		{"-", "2000Q1", 3},
		{"2010-02", "", 2},
	} {
		t.Run(c.from+".."+c.to, func(t *testing.T) {
			code, out, errs := esAt(t, "get", "--home", home, "MSFT", c.from, c.to)
			if code != 0 {
				t.Fatalf("es get: exit %d: %s", code, errs)
			}
			var cli []string
			for _, line := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
				p, v, _ := strings.Cut(line, ",")
				d, err := time.Parse("2006-01-02", p)
				if err != nil {
					t.Fatalf("line %q: %v", line, err)
				}
				cli = append(cli, fmt.Sprintf("%v,%s", functions.ExcelSerial(d.Unix()), v))
			}
			args := []any{"MSFT", nilIfDash(c.from), nilIfDash(c.to)}
			r := eng.Call("ES.Get", args)
			var fn []string
			if r.Err == nil {
				for _, row := range r.Value {
					fn = append(fn, fmt.Sprintf("%v,%s", row[0], strconv.FormatFloat(row[1].(float64), 'g', -1, 64)))
				}
			} else if !strings.HasPrefix(r.Err.Message, "no data") {
				t.Fatalf("ES.Get: %v", r.Err)
			}
			if strings.Join(cli, "\n") != strings.Join(fn, "\n") {
				t.Fatalf("es get and ES.Get differ:\nes get: %v\nES.Get: %v", cli, fn)
			}
			if len(cli) != c.rows {
				t.Fatalf("%d rows, want %d: %v", len(cli), c.rows, cli)
			}
		})
	}
}

func nilIfDash(s string) any {
	if s == "" || s == "-" {
		return nil
	}
	return s
}

// TestCLIEndOfPeriod: a TO that names a quarter covers all of it, as in
// ES.Get (es get used to stop at the quarter's first day: Jan-Apr).
func TestCLIEndOfPeriod(t *testing.T) {
	home := stocksHome(t)
	got := mustES(t, "get", "--home", home, "MSFT", "2005Q1", "2005Q2")
	want := "period,value\n2005-01-01,24.11\n2005-02-01,23.15\n2005-03-01,22.24\n2005-04-01,23.28\n2005-05-01,23.82\n2005-06-01,22.93\n"
	if got != want {
		t.Fatalf("es get MSFT 2005Q1 2005Q2:\n%s\nwant\n%s", got, want)
	}
	// Relative dates and ytd, which es get used to refuse.
	for _, from := range []string{"-1Y", "ytd", "-6M", "43000"} {
		if code, _, errs := esAt(t, "get", "--home", home, "MSFT", from); code != 0 {
			t.Errorf("es get MSFT %s: exit %d: %s", from, code, errs)
		}
	}
}

// TestCLIReversedRange: a start after the end fails with exit 1 and ES.Get's
// words, in es get and es export; the export's file is not written.
func TestCLIReversedRange(t *testing.T) {
	home := stocksHome(t)
	code, out, errs := esAt(t, "get", "--home", home, "MSFT", "2006", "2005")
	if code != 1 || out != "" || !strings.Contains(errs, "start 2006 is after end 2005") {
		t.Fatalf("es get reversed: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	xl := filepath.Join(t.TempDir(), "out.xlsx")
	code, _, errs = esAt(t, "export", "--home", home, "--out", xl, "--from", "2006", "--to", "-20Y", "MSFT")
	if code != 1 || !strings.Contains(errs, "start 2006 is after end -20Y") {
		t.Fatalf("es export reversed: exit %d, stderr %q", code, errs)
	}
	if _, err := os.Stat(xl); !os.IsNotExist(err) {
		t.Fatalf("a refused export wrote %s: %v", xl, err)
	}
	// A date it cannot read stays a usage error.
	if code, _, errs := esAt(t, "export", "--home", home, "--out", xl, "--from", "2005-13", "MSFT"); code != 2 || !strings.Contains(errs, `cannot read date "2005-13"`) {
		t.Fatalf("es export bad date: exit %d, %q", code, errs)
	}
}

// TestCLISearchNoMatch: a search without a hit says so on stderr and exits 1.
func TestCLISearchNoMatch(t *testing.T) {
	home := stocksHome(t)
	code, out, errs := es(t, "search", "--home", home, "zzzz")
	if code != 1 || out != "" || !strings.Contains(errs, `no series match "zzzz"`) {
		t.Fatalf("search without match: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	if out := mustES(t, "search", "--home", home, "ibm"); !strings.Contains(out, "IBM") {
		t.Fatalf("search ibm: %s", out)
	}
}

func TestCLIVersion(t *testing.T) {
	for _, arg := range []string{"--version", "version"} {
		code, out, _ := es(t, arg)
		if code != 0 || !strings.HasPrefix(out, "es ") || !strings.Contains(out, "go1.") {
			t.Fatalf("es %s: exit %d, %q", arg, code, out)
		}
	}
}

// TestCLISuggests: a misspelt command or series id names the nearest; an id
// that differs only by case is that series.
func TestCLISuggests(t *testing.T) {
	code, _, errs := es(t, "gte", "MSFT")
	if code != 2 || !strings.Contains(errs, `did you mean "get"?`) {
		t.Fatalf("es gte: exit %d, %q", code, errs)
	}
	if code, _, errs := es(t, "serach", "x"); code != 2 || !strings.Contains(errs, `did you mean "search"?`) {
		t.Fatalf("es serach: exit %d, %q", code, errs)
	}
	if code, _, errs := es(t, "zzzzzz"); code != 2 || strings.Contains(errs, "did you mean") {
		t.Fatalf("es zzzzzz: exit %d, %q", code, errs)
	}
	home := stocksHome(t)
	code, _, errs = es(t, "get", "--home", home, "MSTF")
	if code != 1 || !strings.Contains(errs, "did you mean MSFT?") {
		t.Fatalf("es get MSTF: exit %d, %q", code, errs)
	}
	if a, b := mustES(t, "get", "--home", home, "msft", "2005"), mustES(t, "get", "--home", home, "MSFT", "2005"); a != b || strings.Count(a, "\n") < 10 {
		t.Fatalf("es get msft differs from MSFT:\n%s\n%s", a, b)
	}
	if a, b := mustES(t, "get", "--home", home, "stocks:ibm", "2005"), mustES(t, "get", "--home", home, "IBM", "2005"); a != b {
		t.Fatalf("es get stocks:ibm differs from IBM:\n%s\n%s", a, b)
	}
}

// TestCLIExportIDs: es export reads ids as es get does.
func TestCLIExportIDs(t *testing.T) {
	home := stocksHome(t)
	xl := filepath.Join(t.TempDir(), "out.xlsx")
	code, _, errs := es(t, "export", "--home", home, "--out", xl, "MSFT", "IMB")
	if code != 1 || !strings.Contains(errs, `unknown series "IMB" (did you mean IBM?)`) {
		t.Fatalf("es export IMB: exit %d, %q", code, errs)
	}
	if _, err := os.Stat(xl); !os.IsNotExist(err) {
		t.Fatalf("a refused export wrote %s: %v", xl, err)
	}
	out := mustES(t, "export", "--home", home, "--out", xl, "--from", "2005Q1", "--to", "2005Q2", "msft", "ibm")
	if !strings.Contains(out, "exported 2 series x 6 dates (2005-01-01 .. 2005-06-01") {
		t.Fatalf("es export msft ibm: %s", out)
	}
}

// TestCLIGetOptions: es get takes ES.Get's options and several series, and
// gives ES.Get's rows.
func TestCLIGetOptions(t *testing.T) {
	home := stocksHome(t)
	st, err := localcache.Open(home, &localcache.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	eng := &functions.Engine{Src: wiring.Source{Store: st}, Now: func() time.Time { return cliNow }}
	for _, c := range [][]string{
		{"MSFT", "2000-02", "2000-04", "chg=diff"},
		{"MSFT", "2000-02", "2000-04", "chg=pct"},
		{"MSFT", "2001", "2001", "yoy=pct", "ma=3"},
		{"MSFT,IBM", "2000-01", "2000-06", "rebase=100"},
		{"MSFT,IBM", "2005", "2006", "per=Q;agg=avg", "scale=2"},
		{"MSFT,GOOG", "2004-06", "2004-09", "fill=zero"},
		{"MSFT,GOOG", "2004-06", "2004-09"},
		{"msft", "2000-01-31", "2000-02-04", "days=weekdays", "fill=prev"},
		{"MSFT", "-1Y", "per=Q", "last=2"},
	} {
		t.Run(strings.Join(c, " "), func(t *testing.T) {
			code, out, errs := esAt(t, append([]string{"get", "--home", home}, c...)...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errs)
			}
			lines := strings.Split(strings.TrimSpace(out), "\n")
			args := make([]any, len(c))
			for i, a := range c {
				args[i] = a
			}
			r := eng.Call("ES.Get", args)
			if r.Err != nil {
				t.Fatal(r.Err)
			}
			if len(lines)-1 != len(r.Value) || len(r.Value) == 0 {
				t.Fatalf("es get %d rows, ES.Get %d:\n%s", len(lines)-1, len(r.Value), out)
			}
			for i, row := range r.Value {
				cells := strings.Split(lines[i+1], ",")
				d, err := time.Parse("2006-01-02", cells[0])
				if err != nil || functions.ExcelSerial(d.Unix()) != row[0] {
					t.Fatalf("row %d: %q, ES.Get date %v", i, lines[i+1], row[0])
				}
				for j, x := range row[1:] {
					want := ""
					if f, ok := x.(float64); ok {
						want = strconv.FormatFloat(f, 'g', -1, 64)
					}
					if cells[j+1] != want {
						t.Fatalf("row %d column %d: %q, ES.Get %v", i, j, cells[j+1], x)
					}
				}
			}
		})
	}
	if got := mustES(t, "get", "--home", home, "MSFT,IBM", "2000-01", "2000-01"); got != "period,MSFT,IBM\n2000-01-01,39.81,100.52\n" {
		t.Fatalf("two series:\n%s", got)
	}
	if code, _, errs := es(t, "get", "--home", home, "MSFT", "chg=ratio"); code != 2 || !strings.Contains(errs, "option chg=ratio: want diff, pct or log") {
		t.Fatalf("bad option: exit %d, %q", code, errs)
	}
	if code, _, errs := es(t, "get", "--home", home, "MSFT,NOPE", "per=A"); code != 1 || !strings.Contains(errs, `series "NOPE" not found`) {
		t.Fatalf("unknown in a list: exit %d, %q", code, errs)
	}
}
