package synth

import (
	"bufio"
	"bytes"
	"io"
	"runtime"
	"sync"
)

const csvHeader = "series_id,period,value,unit,name,source,frequency\n"

// CSV generation is split into chunks of consecutive series (in emission
// order) that workers format in parallel; the caller's goroutine writes the
// chunks in order, so the bytes are the same for any number of workers.
const (
	csvChunkRows = 32 << 10  // target rows per chunk
	csvPieceSize = 512 << 10 // a worker hands over output in pieces of about this size
	csvPieceMax  = csvPieceSize + 64<<10
)

// WriteCSV writes the dataset as CSV with header
// series_id,period,value,unit,name,source,frequency. Fields are quoted per
// RFC 4180 only when needed (names may contain commas). Memory is bounded
// (a few MiB per CPU) whatever the number of rows.
func WriteCSV(w io.Writer, o Options) (Stats, error) {
	p, err := newPlan(o)
	if err != nil {
		return Stats{}, err
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	if _, err := bw.WriteString(csvHeader); err != nil {
		return Stats{}, err
	}

	type task struct {
		lo, hi int // positions in emission order
		out    chan []byte
	}
	workers := runtime.GOMAXPROCS(0)
	tasks := make(chan task)
	order := make(chan task, 2*workers) // bounds how far workers run ahead
	done := make(chan struct{})
	pool := sync.Pool{New: func() any { b := make([]byte, 0, csvPieceMax); return &b }}

	go func() { // dispatcher: cut positions into chunks of about csvChunkRows rows
		defer close(tasks)
		defer close(order)
		for lo := 0; lo < p.n; {
			hi, rows := lo, 0
			for hi < p.n && (hi == lo || rows < csvChunkRows) {
				rows += int(p.lengths[p.perm[hi]])
				hi++
			}
			t := task{lo: lo, hi: hi, out: make(chan []byte, 4)}
			select {
			case order <- t:
			case <-done:
				return
			}
			select {
			case tasks <- t:
			case <-done:
				return
			}
			lo = hi
		}
	}()

	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := p.newSeriesGen()
			var pre, suf []byte
			for t := range tasks {
				buf := *pool.Get().(*[]byte)
				for pos := t.lo; pos < t.hi; pos++ {
					s.load(int(p.perm[pos]))
					pre, suf = s.csvAffixes(pre[:0], suf[:0])
					for j := 0; j < s.length; j++ {
						c := s.cents()
						buf = append(buf, pre...)
						buf = s.cur.appendPeriod(buf)
						buf = append(buf, ',')
						buf = appendCents(buf, c)
						buf = append(buf, suf...)
						s.cur.next()
						if len(buf) >= csvPieceSize {
							select {
							case t.out <- buf:
							case <-done:
								return
							}
							buf = (*pool.Get().(*[]byte))[:0]
						}
					}
				}
				select {
				case t.out <- buf:
				case <-done:
					return
				}
				close(t.out)
			}
		}()
	}

	var st Stats
	var werr error
	for t := range order {
		for b := range t.out {
			if werr == nil {
				_, werr = bw.Write(b)
			}
			b = b[:0]
			pool.Put(&b)
			if werr != nil {
				break
			}
		}
		if werr != nil {
			break
		}
		for pos := t.lo; pos < t.hi; pos++ {
			st.Rows += int64(p.lengths[p.perm[pos]])
		}
		st.Series += t.hi - t.lo
	}
	close(done)
	wg.Wait()
	if werr != nil {
		return st, werr
	}
	return st, bw.Flush()
}

// csvAffixes renders what precedes ("id,") and follows (",unit,name,source,freq\n")
// the period and value on each row of the current series.
func (s *seriesGen) csvAffixes(pre, suf []byte) ([]byte, []byte) {
	pre = appendCSVField(pre, s.g.id)
	pre = append(pre, ',')
	suf = append(suf, ',')
	suf = appendCSVField(suf, []byte(s.g.unit))
	suf = append(suf, ',')
	suf = appendCSVField(suf, s.g.name)
	suf = append(suf, ',')
	suf = appendCSVField(suf, []byte(s.g.source))
	suf = append(suf, ',')
	suf = append(suf, freqCode[s.f]...)
	suf = append(suf, '\n')
	return pre, suf
}

// appendCSVField appends f, quoted the way encoding/csv would quote it.
func appendCSVField(b, f []byte) []byte {
	if !fieldNeedsQuotes(f) {
		return append(b, f...)
	}
	b = append(b, '"')
	for _, c := range f {
		if c == '"' {
			b = append(b, '"')
		}
		b = append(b, c)
	}
	return append(b, '"')
}

func fieldNeedsQuotes(f []byte) bool {
	if len(f) == 0 {
		return false
	}
	if string(f) == `\.` || bytes.ContainsAny(f, "\",\r\n") {
		return true
	}
	return f[0] == ' ' || f[0] == '\t'
}
