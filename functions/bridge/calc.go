package bridge

import (
	"bufio"
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

// block is how many calls a worker of a big batch takes at a time: it
// evaluates and encodes them into one buffer. Small enough to balance a
// batch of slow ES.Get calls and to start writing early, large enough that
// the atomic counter is not contended by a batch of fast ES.Latest calls.
const block = 64

// parallelMin: smaller batches run on the request's goroutine.
const parallelMin = 64

// evaluate answers calls in order, one after the other. It is the meaning
// of a batch, which respond keeps while spreading big batches over cores:
// the response is bounded by maxCells cells in all; the calls whose
// results, added up in order, fit are answered; from the first that does
// not fit on, every call gets #NUM!. When ctx ends (the request's time
// limit), the calls not yet evaluated get #N/A.
func evaluate(ctx context.Context, eng *functions.Engine, calls []call, maxCells int) []functions.Result {
	res := make([]functions.Result, len(calls))
	bg := budget{max: maxCells}
	for i := range calls {
		bg.settle(ctx, eng, &calls[i], &res[i], false)
	}
	return res
}

// answer evaluates one call.
func answer(eng *functions.Engine, c *call) functions.Result {
	if c.err != nil {
		return functions.Result{Err: c.err}
	}
	return eng.Eval(c.fn, c.args)
}

// budget is the cell bound of one response, applied in call order.
type budget struct {
	max, total int
	over, late *functions.CellError // made once, shared by the cells they fill
}

// settle makes r the final answer to c, the calls before it being settled:
// a call not evaluated yet (r is the zero Result) is evaluated if the
// budget has room, or answered #N/A if the time limit has cut the batch
// (cut, or ctx ended); then a result past the bound becomes #NUM!.
func (bg *budget) settle(ctx context.Context, eng *functions.Engine, c *call, r *functions.Result, cut bool) {
	if bg.total <= bg.max && r.Err == nil && r.Grid == nil && r.Value == nil {
		if cut || ctx.Err() != nil {
			if bg.late == nil {
				bg.late = &functions.CellError{Code: functions.CodeNA, Message: "the request took too long and was cut short; recalculate, or split the batch"}
			}
			r.Err = bg.late
		} else {
			*r = answer(eng, c)
		}
	}
	bg.total += cellsOf(r)
	if bg.total > bg.max {
		if bg.over == nil {
			bg.over = &functions.CellError{Code: functions.CodeNum, Message: fmt.Sprintf(
				"the results of this batch exceed %d cells in all; narrow the ranges or use last=", bg.max)}
		}
		*r = functions.Result{Err: bg.over}
	}
}

// respond answers calls with {"results":[...]} on w: exactly the bytes of
// writeResults(w, evaluate(ctx, eng, calls, maxCells)), which a test checks.
//
// A big batch is streamed. GOMAXPROCS workers take blocks of calls in index
// order, evaluate them and encode each block into its own buffer, while the
// request's goroutine writes the blocks in order as they are done: the
// first bytes leave while later blocks are still being evaluated. A worker
// skips the calls past the budget as it stands (so a batch over the bound
// costs no more than the bound) and encodes its block assuming the budget
// holds. The writer settles a block whose assumption failed (a call
// skipped or cut by the time limit, or the bound crossed inside it) call
// by call as evaluate does, and encodes it again.
func respond(ctx context.Context, w io.Writer, eng *functions.Engine, calls []call, maxCells int) {
	n := len(calls)
	workers := runtime.GOMAXPROCS(0)
	if n < parallelMin || workers == 1 {
		writeResults(w, evaluate(ctx, eng, calls, maxCells))
		return
	}
	res := make([]functions.Result, n)
	nblocks := (n + block - 1) / block
	type encoded struct {
		buf   *[]byte // nil if !clean
		cells int
		clean bool // every call answered, none past the budget as the worker saw it
	}
	outs := make([]encoded, nblocks)
	var (
		used     atomic.Int64 // cells of the results computed so far
		timedOut atomic.Bool
	)
	work := func(e *encoder, k int) {
		lo, hi := k*block, min(n, (k+1)*block)
		o := encoded{clean: true}
		for i := lo; i < hi; i++ {
			if ctx.Err() != nil {
				timedOut.Store(true)
				o.clean = false
				break
			}
			if used.Load() > int64(maxCells) {
				o.clean = false // left to the writer's settle
				continue
			}
			res[i] = answer(eng, &calls[i])
			c := cellsOf(&res[i])
			used.Add(int64(c))
			o.cells += c
		}
		if o.clean {
			o.buf = encodeRange(e, res, lo, hi)
		}
		outs[k] = o
	}
	// Blocks of small results (a block of ES.Latest is ~3 KB) are gathered
	// into writes of up to 64 KB: each write to the connection is a TLS
	// record and a syscall, which for small ones costs more than the bytes.
	bw := bufWriters.Get().(*bufio.Writer)
	bw.Reset(w)
	w = bw
	bg := budget{max: maxCells}
	var e encoder
	w.Write([]byte(`{"results":[`))
	inOrder(nblocks, workers, work, func(k int) {
		lo, hi := k*block, min(n, (k+1)*block)
		o := outs[k]
		if o.clean && bg.total+o.cells <= maxCells {
			bg.total += o.cells // settle would change nothing
		} else {
			if o.buf != nil {
				putBuf(o.buf)
			}
			for i := lo; i < hi; i++ {
				bg.settle(ctx, eng, &calls[i], &res[i], timedOut.Load())
			}
			o.buf = encodeRange(&e, res, lo, hi)
		}
		w.Write(*o.buf)
		putBuf(o.buf)
		clear(res[lo:hi]) // written: let the collector have the cells
	})
	w.Write([]byte("]}\n"))
	bw.Flush()
	bw.Reset(nil)
	bufWriters.Put(bw)
}

var bufWriters = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 64<<10) }}

// encodeRange encodes res[lo:hi], each preceded by a comma but the first
// of all, into a pooled buffer.
func encodeRange(e *encoder, res []functions.Result, lo, hi int) *[]byte {
	buf := getBuf()
	b := slices.Grow(*buf, sizeOf(res[lo:hi]))
	for i := lo; i < hi; i++ {
		if i > 0 {
			b = append(b, ',')
		}
		b = e.result(b, &res[i])
	}
	*buf = b
	return buf
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
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	respond(ctx, w, s.eng, calls, s.opts.MaxBatchCells)
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
	w.Write([]byte(`{"results":[`))
	bufs := make([]*[]byte, nchunks)
	inOrder(nchunks, runtime.GOMAXPROCS(0), func(e *encoder, k int) {
		bufs[k] = encodeRange(e, res, k*encodeChunk, min(n, (k+1)*encodeChunk))
	}, func(k int) {
		w.Write(*bufs[k])
		putBuf(bufs[k])
	})
	w.Write([]byte("]}\n"))
}

// inOrder runs work(k) for k = 0..n-1 on up to workers goroutines, which
// take the ks in order, each with its own encoder, and calls emit(k) on the
// caller's goroutine for k = 0..n-1 in order, each as soon as work(k) is
// done. It returns when every emit has returned.
func inOrder(n, workers int, work func(e *encoder, k int), emit func(k int)) {
	done := make([]chan struct{}, n)
	for k := range done {
		done[k] = make(chan struct{})
	}
	var next atomic.Int64
	for range min(workers, n) {
		go func() {
			var e encoder
			for {
				k := int(next.Add(1)) - 1
				if k >= n {
					return
				}
				work(&e, k)
				close(done[k])
			}
		}()
	}
	for k := range n {
		<-done[k]
		emit(k)
	}
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
