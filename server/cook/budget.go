package cook

import (
	"fmt"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// budgetAllocator is a memory.Allocator that refuses to hold more than
// limit bytes at once: arrow-go and the Parquet reader size buffers from
// lengths an input declares (pages, decompressed buffers, dictionaries),
// and a forged length must become an error, not a fatal out-of-memory.
// A refused allocation panics with an error wrapping ErrMalformed; the
// readers recover it (arrow-go's record loaders do, and readParquet and
// readArrow recover around their whole read).
type budgetAllocator struct {
	mem   memory.Allocator
	limit int64
	used  atomic.Int64
}

// inputBudget is the memory a reader may hold for an input of size bytes:
// MaxIPCExpansion times the input, plus 64 MiB.
func inputBudget(size int64) int64 {
	if size < 0 {
		size = 0
	}
	return MaxIPCExpansion*size + ipcExpansionSlack
}

func newBudgetAllocator(limit int64) *budgetAllocator {
	return &budgetAllocator{mem: memory.DefaultAllocator, limit: limit}
}

// take accounts for n more bytes (n may be negative: a shrink).
func (a *budgetAllocator) take(n int) {
	if u := a.used.Add(int64(n)); n > 0 && u > a.limit {
		a.used.Add(-int64(n))
		panic(fmt.Errorf("%w: the input declares a buffer of %d bytes (over the %d bytes allowed for it)", ErrMalformed, n, a.limit))
	}
}

func (a *budgetAllocator) Allocate(n int) []byte {
	if n < 0 {
		panic(fmt.Errorf("%w: allocation of %d bytes", ErrMalformed, n))
	}
	a.take(n)
	return a.mem.Allocate(n)
}

func (a *budgetAllocator) Reallocate(n int, b []byte) []byte {
	if n < 0 {
		panic(fmt.Errorf("%w: allocation of %d bytes", ErrMalformed, n))
	}
	a.take(n - len(b))
	return a.mem.Reallocate(n, b)
}

func (a *budgetAllocator) Free(b []byte) {
	a.used.Add(-int64(len(b)))
	a.mem.Free(b)
}

// recoverInput turns a panic in a reader of untrusted input into an error
// (arrow-go and the Parquet reader panic on some inconsistent inputs).
func recoverInput(name string, err *error) {
	if p := recover(); p != nil {
		e, ok := p.(error)
		if !ok {
			e = fmt.Errorf("%v", p)
		}
		*err = &InputError{File: name, Err: fmt.Errorf("%w: %w", ErrMalformed, e)}
	}
}
