package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// procStatus returns the fields of /proc/self/status that end in kB, in MiB.
func procStatus() map[string]float64 { return procKB("/proc/self/status") }

// smapsRollup is /proc/self/smaps_rollup's sizes in MiB (AnonHugePages:
// anonymous memory in 2 MiB pages).
func smapsRollup() map[string]float64 { return procKB("/proc/self/smaps_rollup") }

// procKB reads the "name: N kB" lines of a /proc file, in MiB.
func procKB(path string) map[string]float64 {
	out := map[string]float64{}
	f, err := os.Open(path)
	if err != nil {
		return out
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		num, unit, _ := strings.Cut(v, " ")
		if unit != "kB" {
			continue
		}
		n, err := strconv.ParseFloat(num, 64)
		if err == nil {
			out[k] = n / 1024
		}
	}
	return out
}

// rssMB is VmRSS in MiB.
func rssMB() float64 { return procStatus()["VmRSS"] }

// report is a JSON object that keeps its keys in insertion order.
type report struct {
	keys []string
	vals map[string]any
}

func newReport() *report { return &report{vals: map[string]any{}} }

func (r *report) Set(k string, v any) {
	if f, ok := v.(float64); ok {
		if math.IsNaN(f) || math.IsInf(f, 0) {
			v = nil
		} else {
			v = round(f)
		}
	}
	if _, ok := r.vals[k]; !ok {
		r.keys = append(r.keys, k)
	}
	r.vals[k] = v
}

func (r *report) Get(k string) (float64, bool) {
	v, ok := r.vals[k]
	if !ok || v == nil {
		return math.NaN(), false
	}
	switch x := v.(type) {
	case float64:
		return x, true
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	}
	return math.NaN(), false
}

// F returns the number under k, NaN when absent.
func (r *report) F(k string) float64 { v, _ := r.Get(k); return v }

func (r *report) Merge(prefix string, m map[string]any) {
	for _, k := range slices.Sorted(maps.Keys(m)) {
		r.Set(prefix+k, m[k])
	}
}

func (r *report) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range r.keys {
		if i > 0 {
			b.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		vb, err := json.Marshal(r.vals[k])
		if err != nil {
			return nil, err
		}
		b.Write(kb)
		b.WriteByte(':')
		b.Write(vb)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// round keeps 4 significant digits (or 3 decimals for large numbers), for
// readable JSON.
func round(f float64) float64 {
	if f == 0 || math.IsNaN(f) || math.IsInf(f, 0) {
		return f
	}
	a := math.Abs(f)
	if a >= 1000 {
		return math.Round(f*1000) / 1000
	}
	d := 4 - int(math.Ceil(math.Log10(a)))
	p := math.Pow(10, float64(d))
	return math.Round(f*p) / p
}

func ms(d time.Duration) float64 { return float64(d) / 1e6 }
func us(d time.Duration) float64 { return float64(d) / 1e3 }

// pct returns the p-th percentile (0..100) of sorted durations.
func pct(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p/100*float64(len(sorted)))) - 1
	if i < 0 {
		i = 0
	}
	if i >= len(sorted) {
		i = len(sorted) - 1
	}
	return sorted[i]
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// regularFiles lists the regular files under dir, recursively.
func regularFiles(dir string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			out = append(out, p)
		}
		return nil
	})
	return out, err
}

// dropCache asks the kernel to evict the files' pages from the page cache
// (they are clean: the cook fsyncs). It returns the percentage of their pages
// still cached afterwards, checked with mincore, as a sanity check.
func dropCache(paths ...string) (stillCachedPct float64, err error) {
	var total, cached int64
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return 0, err
		}
		err = unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
		if err == nil {
			var t, c int64
			t, c, err = residentPages(f)
			total += t
			cached += c
		}
		f.Close()
		if err != nil {
			return 0, fmt.Errorf("drop cache of %s: %w", p, err)
		}
	}
	if total == 0 {
		return 0, nil
	}
	return 100 * float64(cached) / float64(total), nil
}

// residentPages counts the file's pages and how many are in the page cache.
func residentPages(f *os.File) (total, cached int64, err error) {
	st, err := f.Stat()
	if err != nil || st.Size() == 0 {
		return 0, 0, err
	}
	b, err := unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return 0, 0, err
	}
	defer unix.Munmap(b)
	pg := int64(os.Getpagesize())
	n := (st.Size() + pg - 1) / pg
	vec := make([]byte, n)
	if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
		return 0, 0, e
	}
	for _, v := range vec {
		if v&1 != 0 {
			cached++
		}
	}
	return n, cached, nil
}

// warmCache reads the files so that they are in the page cache.
func warmCache(paths ...string) error {
	buf := make([]byte, 1<<20)
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		_, err = io.CopyBuffer(io.Discard, struct{ io.Reader }{f}, buf)
		f.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

func fileSize(p string) int64 {
	st, err := os.Stat(p)
	if err != nil {
		return -1
	}
	return st.Size()
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench: "+format+"\n", args...)
}

// loadAvg is the 1-minute load average (other work on the machine skews
// every figure; the report records it).
func loadAvg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return math.NaN()
	}
	f, _, _ := strings.Cut(string(b), " ")
	v, err := strconv.ParseFloat(f, 64)
	if err != nil {
		return math.NaN()
	}
	return v
}

// pmdMapped is mappedRSS's key for the file-backed bytes mapped by 2 MiB
// page-table entries (FilePmdMapped), over all mappings.
const pmdMapped = "FilePmdMapped"

// mappedRSS returns the resident size in MiB of this process's mappings of
// each file, by base name (summed over its mapping regions), from
// /proc/self/smaps.
func mappedRSS() map[string]float64 {
	out := map[string]float64{}
	b, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		return out
	}
	cur := ""
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if strings.Contains(f[0], "-") && len(f) >= 5 && !strings.HasSuffix(f[0], ":") {
			cur = ""
			if len(f) >= 6 {
				cur = filepath.Base(f[5])
			}
			continue
		}
		if f[0] == "Rss:" && cur != "" && len(f) >= 2 {
			if kb, err := strconv.ParseFloat(f[1], 64); err == nil {
				out[cur] += kb / 1024
			}
		}
		if f[0] == "FilePmdMapped:" && len(f) >= 2 {
			if kb, err := strconv.ParseFloat(f[1], 64); err == nil {
				out[pmdMapped] += kb / 1024
			}
		}
	}
	return out
}
