package delta

import (
	"log/slog"
	"testing"
)

// BenchmarkWALOpen replays a log of 600,000 records in 147 frames (the
// shape of issue 10's damaged segment, intact here): the cost of reading
// and checking every frame at open.
func BenchmarkWALOpen(b *testing.B) {
	dir := b.TempDir()
	w, _, err := OpenWAL(dir, false, 0, slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	const per, frames = 4096, 147
	for i := range frames {
		if err := w.Append(liveBatch(uint64(i*per+1), per)); err != nil {
			b.Fatal(err)
		}
	}
	w.Close()
	b.SetBytes(w.Size())
	b.ResetTimer()
	for b.Loop() {
		w, recs, err := OpenWAL(dir, true, 0, slog.New(slog.DiscardHandler))
		if err != nil || len(recs) != per*frames {
			b.Fatalf("%d records, %v", len(recs), err)
		}
		w.Close()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(per*frames), "ns/record")
}
