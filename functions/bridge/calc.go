package bridge

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/energyscope/energyscope/functions"
)

// chunk is how many calls one worker takes at a time: small enough to
// balance a batch of slow ES.Get calls, large enough that the atomic
// counter is not contended by a batch of fast ES.Latest calls.
const chunk = 32

// parallelMin: smaller batches run on the request's goroutine.
const parallelMin = 64

// evaluate answers calls in order. Big batches are spread over GOMAXPROCS
// workers that take chunks of calls in index order. The response is
// bounded by maxCells cells in all: the calls whose results, added up in
// order, fit are answered; from the first that does not fit on, every call
// gets #NUM!. When ctx ends (the request's time limit), the calls
// not yet evaluated get #N/A.
func evaluate(ctx context.Context, eng *functions.Engine, calls []call, maxCells int) []functions.Result {
	res := make([]functions.Result, len(calls))
	var used atomic.Int64 // cells of the results computed so far
	one := func(i int) {
		c := &calls[i]
		if c.err != nil {
			res[i] = functions.Result{Err: c.err}
			return
		}
		if used.Load() > int64(maxCells) {
			return // answered by the budget pass below
		}
		r := eng.Eval(c.fn, c.args)
		res[i] = r
		used.Add(int64(cellsOf(&r)))
	}
	var timedOut atomic.Bool
	run := func(lo, hi int) {
		for i := lo; i < hi; i++ {
			if ctx.Err() != nil {
				timedOut.Store(true)
				return
			}
			one(i)
		}
	}
	n := len(calls)
	workers := runtime.GOMAXPROCS(0)
	if n < parallelMin || workers == 1 {
		run(0, n)
	} else {
		var next atomic.Int64
		var wg sync.WaitGroup
		for range min(workers, (n+chunk-1)/chunk) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					lo := int(next.Add(chunk)) - chunk
					if lo >= n || ctx.Err() != nil {
						if lo < n {
							timedOut.Store(true)
						}
						return
					}
					run(lo, min(lo+chunk, n))
				}
			}()
		}
		wg.Wait()
	}

	// The budget pass, in order. A result never computed (skipped while the
	// budget looked spent, or cut by the time limit) is the zero Result.
	// A call skipped because a concurrent later call used up the budget is
	// computed here if the calls before it leave room, so the answer does
	// not depend on timing.
	var total int
	var over, late *functions.CellError
	for i := range res {
		r := &res[i]
		if total <= maxCells && r.Err == nil && r.Grid == nil {
			if timedOut.Load() || ctx.Err() != nil {
				if late == nil {
					late = &functions.CellError{Code: functions.CodeNA, Message: "the request took too long and was cut short; recalculate, or split the batch"}
				}
				r.Err = late
			} else {
				*r = eng.Eval(calls[i].fn, calls[i].args)
			}
		}
		total += cellsOf(r)
		if total > maxCells {
			if over == nil {
				over = &functions.CellError{Code: functions.CodeNum, Message: fmt.Sprintf(
					"the results of this batch exceed %d cells in all; narrow the ranges or use last=", maxCells)}
			}
			*r = functions.Result{Err: over}
		}
	}
	return res
}

// cellsOf counts a result's cells; an error is one.
func cellsOf(r *functions.Result) int {
	switch {
	case r.Err != nil:
		return 1
	case r.Grid != nil:
		return max(1, r.Grid.Rows*r.Grid.Cols)
	case len(r.Value) > 0:
		return len(r.Value) * len(r.Value[0])
	}
	return 1
}

// bufPool holds request and response buffers. Buffers that grew past
// maxPooled are dropped, so one huge batch does not pin its memory.
var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 64<<10); return &b }}

const maxPooled = 16 << 20

func getBuf() *[]byte { return bufPool.Get().(*[]byte) }

func putBuf(b *[]byte) {
	if cap(*b) > maxPooled {
		return
	}
	*b = (*b)[:0]
	bufPool.Put(b)
}

// handleCalc is POST /v1/calc.
func (s *Server) handleCalc(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), s.opts.Timeout)
	defer cancel()
	body := getBuf()
	defer putBuf(body)
	var err error
	*body, err = readBody(*body, http.MaxBytesReader(w, r.Body, s.opts.MaxBody))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeError(w, http.StatusRequestEntityTooLarge, functions.CodeNA,
				fmt.Sprintf("request body larger than %d bytes; split the batch", s.opts.MaxBody))
			return
		}
		writeError(w, http.StatusBadRequest, functions.CodeNA, "read request body: "+err.Error())
		return
	}
	calls, err := decodeCalc(*body, s.opts.MaxCalls)
	if err != nil {
		var re *RequestError
		if errors.As(err, &re) {
			writeError(w, re.Status, functions.CodeNA, re.Msg)
		} else {
			writeError(w, http.StatusBadRequest, functions.CodeNA, err.Error())
		}
		return
	}
	res := evaluate(ctx, s.eng, calls, s.opts.MaxBatchCells)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	writeResults(w, res)
}

// readBody reads r into b, growing it as needed.
func readBody(b []byte, r io.Reader) ([]byte, error) {
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
}

// encodeChunk is how many results one encoding task writes.
const encodeChunk = 256

// writeResults writes {"results":[...]} to w. Big responses are encoded
// in parallel into per-chunk buffers and written in order (chunked, if w is
// an http.ResponseWriter); others in one buffer, with a Content-Length.
func writeResults(w io.Writer, res []functions.Result) {
	n := len(res)
	nchunks := (n + encodeChunk - 1) / encodeChunk
	if nchunks <= 1 || runtime.GOMAXPROCS(0) == 1 || totalCells(res) < 50_000 {
		buf := getBuf()
		b := slices.Grow(*buf, sizeOf(res))
		b = append(b, `{"results":[`...)
		var e encoder
		for i := range res {
			if i > 0 {
				b = append(b, ',')
			}
			b = e.result(b, &res[i])
		}
		b = append(b, "]}\n"...)
		if hw, ok := w.(http.ResponseWriter); ok {
			// A known length spares the chunked framing on both sides.
			hw.Header().Set("Content-Length", strconv.Itoa(len(b)))
		}
		w.Write(b)
		*buf = b
		putBuf(buf)
		return
	}
	bufs := make([]*[]byte, nchunks)
	done := make([]chan struct{}, nchunks)
	for i := range done {
		done[i] = make(chan struct{})
	}
	var next atomic.Int64
	for range min(runtime.GOMAXPROCS(0), nchunks) {
		go func() {
			var e encoder
			for {
				k := int(next.Add(1)) - 1
				if k >= nchunks {
					return
				}
				lo, hi := k*encodeChunk, min(n, (k+1)*encodeChunk)
				buf := getBuf()
				b := slices.Grow(*buf, sizeOf(res[lo:hi]))
				for i := lo; i < hi; i++ {
					if i > 0 {
						b = append(b, ',')
					}
					b = e.result(b, &res[i])
				}
				*buf = b
				bufs[k] = buf
				close(done[k])
			}
		}()
	}
	w.Write([]byte(`{"results":[`))
	for k := range nchunks {
		<-done[k]
		w.Write(*bufs[k])
		putBuf(bufs[k])
	}
	w.Write([]byte("]}\n"))
}

// sizeOf guesses the JSON size of res, so that a response buffer is sized
// once rather than copied as it grows: a number with its comma is ~9 bytes.
func sizeOf(res []functions.Result) int {
	n := 16
	for i := range res {
		n += 64
		if g := res[i].Grid; g != nil {
			n += 9*len(g.Num) + 3*g.Rows
		}
	}
	return n
}

func totalCells(res []functions.Result) int {
	n := 0
	for i := range res {
		n += cellsOf(&res[i])
	}
	return n
}
