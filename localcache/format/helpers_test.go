package format

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"
	"unsafe"
)

// writeSnap cooks tb into a fresh directory under t.TempDir() and returns
// the directory and the manifest.
func writeSnap(t testing.TB, tb *Table, o WriteOptions) (string, *Manifest) {
	t.Helper()
	if o.Dataset == "" {
		o.Dataset = "test"
	}
	if o.Created.IsZero() {
		o.Created = time.Unix(1700000000, 0)
	}
	dir := filepath.Join(t.TempDir(), "snap")
	m, _, err := Write(dir, tb, o)
	if err != nil {
		t.Fatalf("Write: %v", err)
	}
	return dir, m
}

func readFile(t testing.TB, dir, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// aligned copies b into memory aligned like a page-aligned mapping (the
// readers cast buffers to []float64 and friends in place).
func aligned(b []byte) []byte {
	if len(b) == 0 {
		return []byte{}
	}
	w := make([]uint64, (len(b)+7)/8)
	out := unsafe.Slice((*byte)(unsafe.Pointer(&w[0])), len(b))
	copy(out, b)
	return out
}

func ts(s string) int64 {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t.Unix()
}

var allFreqs = []Frequency{Hourly, Daily, Weekly, Monthly, Quarterly, Annual}

// randomTable builds a table of ns series with up to maxLen rows each, on
// bucket starts of random frequencies, without duplicates, rows in series
// order. hourly=false keeps it a date32 snapshot.
func randomTable(rng *rand.Rand, ns, maxLen int, hourly bool) *Table {
	tb := &Table{}
	for i := 0; i < ns; i++ {
		f := allFreqs[1+rng.IntN(len(allFreqs)-1)]
		if hourly && rng.IntN(2) == 0 {
			f = Hourly
		}
		tb.Series = append(tb.Series, SeriesMeta{
			ID:        fmt.Sprintf("S%03d.%s", rng.IntN(1000), string(rune('a'+i%26))) + fmt.Sprint(i),
			Name:      fmt.Sprintf("series number %d", i),
			Unit:      []string{"", "MWh", "$/bbl", "°C"}[rng.IntN(4)],
			Source:    "rand",
			Frequency: f,
		})
		p := f.Normalize(ts("1990-01-01T00:00:00Z") + rng.Int64N(40*365*86400))
		n := rng.IntN(maxLen + 1)
		for k := 0; k < n; k++ {
			tb.Append(uint32(i), p, float64(rng.IntN(1e6))/100)
			p = nextPeriod(f, p)
		}
	}
	return tb
}

// nextPeriod is the start of the bucket after the one starting at p.
func nextPeriod(f Frequency, p int64) int64 {
	t := time.Unix(p, 0).UTC()
	switch f {
	case Hourly:
		return p + 3600
	case Daily:
		return p + 86400
	case Weekly:
		return p + 7*86400
	case Monthly:
		return t.AddDate(0, 1, 0).Unix()
	case Quarterly:
		return t.AddDate(0, 3, 0).Unix()
	}
	return t.AddDate(1, 0, 0).Unix()
}
