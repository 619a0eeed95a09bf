//go:build unix

package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

const benchIngestRows = 100_000

// benchIngestBodies are the same 100,000 rows (1,000 hourly series) as a
// CSV, JSON and Arrow stream body of POST /v1/datasets/{name}/rows.
func benchIngestBodies(b *testing.B) (csvBody, jsonBody, arrowBody []byte) {
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	var c bytes.Buffer
	c.WriteString("series_id,period,value\n")
	type row struct {
		ID     string  `json:"series_id"`
		Period string  `json:"period"`
		Value  float64 `json:"value"`
	}
	rows := make([]row, 0, benchIngestRows)
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "series_id", Type: arrow.BinaryTypes.String},
		{Name: "period", Type: &arrow.TimestampType{Unit: arrow.Second, TimeZone: "UTC"}},
		{Name: "value", Type: arrow.PrimitiveTypes.Float64},
	}, nil)
	rb := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer rb.Release()
	for i := range benchIngestRows {
		id := fmt.Sprintf("ELEC.PLANT.%04d.H", i%1000)
		p := t0.Add(time.Duration(i/1000) * time.Hour)
		v := float64(i%977) / 7
		fmt.Fprintf(&c, "%s,%s,%g\n", id, p.Format(time.RFC3339), v)
		rows = append(rows, row{id, p.Format(time.RFC3339), v})
		rb.Field(0).(*array.StringBuilder).Append(id)
		rb.Field(1).(*array.TimestampBuilder).Append(arrow.Timestamp(p.Unix()))
		rb.Field(2).(*array.Float64Builder).Append(v)
	}
	j, err := json.Marshal(map[string]any{"rows": rows})
	if err != nil {
		b.Fatal(err)
	}
	rec := rb.NewRecordBatch()
	defer rec.Release()
	var a bytes.Buffer
	w := ipc.NewWriter(&a, ipc.WithSchema(sc))
	if err := w.Write(rec); err != nil {
		b.Fatal(err)
	}
	w.Close()
	return c.Bytes(), j, a.Bytes()
}

func benchParse(b *testing.B, body []byte, parse func([]byte) (int, error)) {
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	rows := 0
	cpu0 := cpuTime()
	for b.Loop() {
		n, err := parse(body)
		if err != nil {
			b.Fatal(err)
		}
		rows += n
	}
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(rows), "cpu-ns/row")
	b.ReportMetric(float64(rows)/b.Elapsed().Seconds(), "rows/s")
}

func BenchmarkParseRowsCSV(b *testing.B) {
	c, _, _ := benchIngestBodies(b)
	benchParse(b, c, func(in []byte) (int, error) {
		recs, err := ParseRowsCSV(bytes.NewReader(in), "body", RowColumns{}, false)
		return len(recs), err
	})
}

func BenchmarkParseRowsJSON(b *testing.B) {
	_, j, _ := benchIngestBodies(b)
	benchParse(b, j, func(in []byte) (int, error) {
		recs, err := ParseRowsJSON(bytes.NewReader(in))
		return len(recs), err
	})
}

func BenchmarkParseRowsArrow(b *testing.B) {
	_, _, a := benchIngestBodies(b)
	benchParse(b, a, func(in []byte) (int, error) {
		recs, err := ParseRowsArrow(bytes.NewReader(in))
		return len(recs), err
	})
}

// cpuTime is the user + system CPU time of the process: on this shared,
// loaded machine wall time per op swings with the neighbours, CPU time
// much less.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
