// Command es is the EnergyScope command line: generate and cook datasets,
// look series up, verify snapshots, and run the demo.
//
// Every subcommand takes --help and --home DIR (default $ES_HOME or the
// user's data directory) and exits 0 only on success: 1 when it failed
// (an unknown series, a reversed range, a search without a match), 2 for a
// command line it cannot read. Dates are read with ES.Get's grammar
// (functions.ParseDate), so a range means the same rows here as in Excel.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/energyscope/energyscope/functions"
	"github.com/energyscope/energyscope/localcache"
)

type command struct {
	name    string
	args    string
	summary string
	run     func(env *env, args []string) error
}

// env is what a command needs from the process: streams and a clock, so
// tests can run commands in-process.
type env struct {
	stdout, stderr io.Writer
	now            func() time.Time // nil: time.Now; "today" and relative dates read it
}

func (e *env) clock() time.Time {
	if e.now != nil {
		return e.now()
	}
	return time.Now()
}

// version is set at build time (-ldflags "-X main.version=v1.2.3"); without
// it, es --version reports the module version and VCS revision Go recorded.
var version = ""

func versionString() string {
	v, rev, dirty := version, "", false
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			v = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
	}
	if v == "" {
		v = "dev"
	}
	out := "es " + v
	if rev != "" {
		if len(rev) > 12 {
			rev = rev[:12]
		}
		if dirty {
			rev += "+dirty"
		}
		out += " (" + rev + ")"
	}
	return out + " " + runtime.Version()
}

func commands() []command {
	return []command{
		{"gen", "--out FILE [--series N --rows M --seed S --intraday]", "generate a synthetic energy dataset (.csv or .parquet)", runGen},
		{"cook", "--dataset NAME --in FILE [--in FILE ...] [mapping flags]", "cook source files into a dataset snapshot", runCook},
		{"get", "[--dataset NAME] [--asof WHEN] SERIES[,SERIES...] [FROM [TO]] [key=value ...]", "print a series as CSV period,value (ES.Get's dates and options: per=M chg=pct days=weekdays ...; --asof: as a lake vintage had it)", runGet},
		{"info", "SERIES", "print a series' metadata as JSON", runInfo},
		{"search", "QUERY [--limit N]", "find series by id or name", runSearch},
		{"put", "--dataset NAME [--delete] FILE", "apply CSV rows as live updates (durable on return)", runPut},
		{"compact", "[--dataset NAME] [--keep N]", "fold pending updates into a new snapshot", runCompact},
		{"serve", "[--listen ADDR] [--tls-cert F --tls-key F] [--tokens FILE]", "run the central server: ingest, lookups, snapshot and delta streaming", runServe},
		{"token", "add|ls|rm [--name NAME] [--scope read|write]", "manage the server's access tokens", runToken},
		{"ls", "", "list datasets, their snapshots and pending updates", runLs},
		{"vintages", "--dataset NAME [--json]", "list a server home's lake vintages of a dataset (every published snapshot)", runVintages},
		{"tag", "--dataset NAME --vintage V --name TAG", "name a lake vintage; a tagged vintage is never expired", runTag},
		{"rollback", "--dataset NAME --to V", "make a lake vintage current again, as a new epoch (pending updates are dropped, as by a PUT)", runRollback},
		{"verify", "[--dataset NAME]", "check every file of every snapshot (SHA-256 and structure) and every write-ahead log (CRC, seqs)", runVerify},
		{"export", "--out FILE.xlsx SERIES... [--from D --to D --per P --agg A --fill F] [--formulas]", "write series to an Excel workbook: data table, chart, info", runExport},
		{"demo", "[--home DIR]", "generate, cook and query a small dataset plus the real samples", runDemo},
		{"companion", "[--port N] [--allow-origin ORIGIN ...]", "serve the local data to Excel over the localhost HTTPS bridge", runCompanion},
		{"trust", "[--print]", "trust the bridge's local CA certificate (or print how to)", runTrust},
	}
}

func main() {
	os.Exit(run(&env{stdout: os.Stdout, stderr: os.Stderr}, os.Args[1:]))
}

func run(e *env, args []string) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(e.stdout)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	if args[0] == "--version" || args[0] == "-version" || args[0] == "version" {
		fmt.Fprintln(e.stdout, versionString())
		return 0
	}
	for _, c := range commands() {
		if c.name == args[0] {
			err := c.run(e, args[1:])
			if err == nil {
				return 0
			}
			if errors.Is(err, flag.ErrHelp) {
				return 0
			}
			var ue usageError
			if errors.As(err, &ue) {
				fmt.Fprintf(e.stderr, "es %s: %v\nrun 'es %s --help' for usage\n", c.name, err, c.name)
				return 2
			}
			fmt.Fprintf(e.stderr, "es %s: %v\n", c.name, err)
			return 1
		}
	}
	var names []string
	for _, c := range commands() {
		names = append(names, c.name)
	}
	if near := functions.Nearest(args[0], names, 1); len(near) > 0 {
		fmt.Fprintf(e.stderr, "es: unknown command %q; did you mean %q?\nrun 'es --help' for the commands\n", args[0], near[0])
		return 2
	}
	fmt.Fprintf(e.stderr, "es: unknown command %q\n", args[0])
	usage(e.stderr)
	return 2
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "EnergyScope: energy time series served from memory-mapped snapshots.")
	fmt.Fprintln(w, "\nUsage: es COMMAND [flags]\n\nCommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nes --version prints the version. Dates (FROM, TO, --from, --to) read as in ES.Get:\n2020, 2020-03, 2020Q1, 2020-03-15, 2020-03-15T14:30, -1Y, -6M, -10D, ytd, today, 43905 (a serial).")
	fmt.Fprintln(w, "\nEvery command takes --home DIR (default $ES_HOME or", localcache.DefaultHome()+") and --help.")
}

// usageError marks errors in the command line (exit status 2).
type usageError struct{ error }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// newFlags returns a flag set with --home and a usage text.
func newFlags(e *env, name string, home *string) *flag.FlagSet {
	fs := flag.NewFlagSet("es "+name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	if home != nil {
		fs.StringVar(home, "home", localcache.DefaultHome(), "home directory (env ES_HOME)")
	}
	for _, c := range commands() {
		if c.name == name {
			fs.Usage = func() {
				fmt.Fprintf(fs.Output(), "Usage: es %s %s\n\n%s\n\nFlags:\n", name, c.args, c.summary)
				fs.PrintDefaults()
			}
		}
	}
	return fs
}

// parse parses flags that may be interleaved with positional arguments and
// returns the positional ones. A relative date ("-1Y", "-6M", "+10D") is a
// positional argument, not a flag, unless it is the value of the flag before
// it (--from -1Y); "-" is positional too, and "--" ends the flags.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for len(args) > 0 {
		a := args[0]
		switch {
		case a == "--":
			return append(pos, args[1:]...), nil
		case a == "-" || !strings.HasPrefix(a, "-") || isRelativeDate(a):
			pos = append(pos, a)
			args = args[1:]
			continue
		}
		n := 1
		if takesValue(fs, a) && len(args) > 1 {
			n = 2
		}
		if err := fs.Parse(args[:n]); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fs.SetOutput(os.Stdout)
				return nil, err
			}
			return nil, usageError{err}
		}
		args = args[n:]
	}
	return pos, nil
}

// isRelativeDate reports whether a is [+-]digits followed by D, W, M, Q or Y.
func isRelativeDate(a string) bool {
	if len(a) < 3 || (a[0] != '-' && a[0] != '+') || !strings.ContainsRune("DWMQYdwmqy", rune(a[len(a)-1])) {
		return false
	}
	for _, c := range a[1 : len(a)-1] {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// takesValue reports whether a is a flag of fs that takes its value from the
// next argument (--home DIR, not --formulas or --home=DIR).
func takesValue(fs *flag.FlagSet, a string) bool {
	name := strings.TrimLeft(a, "-")
	if strings.Contains(name, "=") {
		return false
	}
	f := fs.Lookup(name)
	if f == nil {
		return false
	}
	if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
		return false
	}
	return true
}

// multiFlag collects a repeated string flag.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }
