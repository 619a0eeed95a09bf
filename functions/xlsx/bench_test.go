package xlsx_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/energyscope/energyscope/functions/xlsx"
)

// The export budgets (issue: workbook export): 100 daily series x 10 years (365K
// cells) in at most 2 s and 200 MB peak RSS; 1M rows through the streaming path in at
// most 300 MB peak RSS. Peak RSS is the kernel's VmHWM of a child process (this test
// binary re-run) that builds the source and exports once; the source's own points
// are part of it, as they are in es export.

// benchCase is one budgeted export.
type benchCase struct {
	name   string
	source func() (*memSource, []string)
	maxRSS int64 // bytes
}

var benchCases = []benchCase{
	{"daily-100x3650", func() (*memSource, []string) { return synthDailyGaps(100, 3650, false) }, 200 << 20},
	{"hourly-1000000x1", func() (*memSource, []string) { return synthHourly(1_000_000) }, 300 << 20},
}

const childEnv = "ES_XLSX_EXPORT_CHILD"

func TestMain(m *testing.M) {
	if name := os.Getenv(childEnv); name != "" {
		os.Exit(exportChild(name, os.Getenv(childEnv+"_OUT")))
	}
	os.Exit(m.Run())
}

// exportChild runs one benchCase and prints "elapsed_ns cpu_ns vmhwm_bytes rows cells bytes".
func exportChild(name, out string) int {
	for _, c := range benchCases {
		if c.name != name {
			continue
		}
		src, ids := c.source()
		start, cpu0 := time.Now(), cpuTime()
		sum, err := xlsx.ExportFile(out, src, xlsx.Request{Series: ids}, nil)
		el, cpu := time.Since(start), cpuTime()-cpu0
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Printf("%d %d %d %d %d %d\n", el.Nanoseconds(), cpu.Nanoseconds(), peakRSS(), sum.Rows, sum.Rows*sum.Series, sum.Bytes)
		return 0
	}
	fmt.Fprintln(os.Stderr, "unknown case", name)
	return 2
}

// peakRSS is this process's VmHWM in bytes (Linux), or -1.
func peakRSS() int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return -1
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				return -1
			}
			return kb << 10
		}
	}
	return -1
}

type childResult struct {
	elapsed, cpu       time.Duration
	rss                int64
	rows, cells, bytes int64
}

func runChild(t testing.TB, c benchCase) childResult {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), childEnv+"="+c.name, childEnv+"_OUT="+filepath.Join(t.TempDir(), "bench.xlsx"))
	out, err := cmd.Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("child %s: %v\n%s", c.name, err, ee.Stderr)
		}
		t.Fatal(err)
	}
	var r childResult
	var ns, cpu int64
	if _, err := fmt.Sscan(string(out), &ns, &cpu, &r.rss, &r.rows, &r.cells, &r.bytes); err != nil {
		t.Fatalf("child output %q: %v", out, err)
	}
	r.elapsed, r.cpu = time.Duration(ns), time.Duration(cpu)
	return r
}

// TestExportBudgets holds both exports to their memory budgets: the streaming path
// must keep memory bounded whatever the size. Time is a benchmark's business
// (BenchmarkExport); it is only logged here.
func TestExportBudgets(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	if runtime.GOOS != "linux" {
		t.Skip("peak RSS is read from /proc")
	}
	for _, c := range benchCases {
		r := runChild(t, c)
		t.Logf("%s: %d rows, %d cells, %.1f MB file in %v wall, %v CPU, peak RSS %.0f MB",
			c.name, r.rows, r.cells, float64(r.bytes)/1e6, r.elapsed.Round(time.Millisecond), r.cpu.Round(time.Millisecond), float64(r.rss)/(1<<20))
		if r.rss > c.maxRSS {
			t.Errorf("%s: peak RSS %d MB > %d MB", c.name, r.rss>>20, c.maxRSS>>20)
		}
	}
}

// BenchmarkExport times each budgeted export in-process and reports the peak RSS of
// one run in a child process (peak-RSS-MB).
func BenchmarkExport(b *testing.B) {
	for _, c := range benchCases {
		b.Run(c.name, func(b *testing.B) {
			src, ids := c.source()
			path := filepath.Join(b.TempDir(), "bench.xlsx")
			var sum xlsx.Summary
			for b.Loop() {
				var err error
				if sum, err = xlsx.ExportFile(path, src, xlsx.Request{Series: ids}, nil); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Seconds())/float64(b.N), "s/export")
			b.ReportMetric(float64(sum.Rows*sum.Series), "cells")
			b.ReportMetric(float64(sum.Bytes)/1e6, "file-MB")
			if runtime.GOOS == "linux" {
				r := runChild(b, c)
				b.ReportMetric(float64(r.rss)/(1<<20), "peak-RSS-MB")
				b.ReportMetric(r.cpu.Seconds(), "child-cpu-s")
			}
		})
	}
}
