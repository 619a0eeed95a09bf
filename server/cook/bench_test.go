package cook

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
)

// genLongCSV makes a PET-shaped long CSV: nSeries weekly series of
// rowsPer rows each, grouped by series, about 40 bytes a line.
func genLongCSV(nSeries, rowsPer int) []byte {
	var b bytes.Buffer
	b.WriteString("series_id,period,value\n")
	r := rand.New(rand.NewPCG(1, 2))
	for s := range nSeries {
		id := fmt.Sprintf("PET.EMM_EPM%04d_PTE_NUS_DPG.W", s)
		for i := range rowsPer {
			day := 10957 + 7*i // from 2000-01-01, weekly
			y, m, d := civil(int64(day))
			fmt.Fprintf(&b, "%s,%04d-%02d-%02d,", id, y, m, d)
			b.WriteString(strconv.FormatFloat(float64(r.IntN(1000000))/1000, 'f', -1, 64))
			b.WriteByte('\n')
		}
	}
	return b.Bytes()
}

// civil is the inverse of days (Hinnant's civil_from_days), for tests.
func civil(z int64) (y, m, d int64) {
	z += 719468
	era := z / 146097
	if z < 0 {
		era = (z - 146096) / 146097
	}
	doe := z - era*146097
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365
	y = yoe + era*400
	doy := doe - (365*yoe + yoe/4 - yoe/100)
	mp := (5*doy + 2) / 153
	d = doy - (153*mp+2)/5 + 1
	m = mp + 3
	if m > 12 {
		m -= 12
	}
	if m <= 2 {
		y++
	}
	return
}

func BenchmarkReadCSVLong(b *testing.B) {
	data := genLongCSV(10000, 100) // 1M rows
	rows := int64(0)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		bl := NewBuilder()
		st, err := bl.AddCSV(bytes.NewReader(data), "bench.csv", InputOptions{})
		if err != nil {
			b.Fatal(err)
		}
		rows += st.Rows
	}
	b.ReportMetric(float64(rows)/b.Elapsed().Seconds(), "rows/s")
}

func BenchmarkParsePeriod(b *testing.B) {
	in := [][]byte{[]byte("2001-01-01"), []byte("2010-01-01T01:00:00"), []byte("200103"), []byte("Jan 1 2000")}
	for b.Loop() {
		for _, s := range in {
			if _, err := ParsePeriod(s); err != nil {
				b.Fatal(err)
			}
		}
	}
}
