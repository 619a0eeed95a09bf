package localcache

import (
	"errors"
	"fmt"
	"runtime/debug"

	"github.com/energyscope/energyscope/localcache/delta"
	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/localcache/snapshot"
)

// Damage containment
//
// Each dataset opens on its own. A dataset whose CURRENT, manifest,
// snapshot files or write-ahead log cannot be opened, whose mapped files
// fault under a lookup (a file truncated underneath), or whose chunk
// hashes fail the background scrub is damaged: it stays listed (Status
// reports Health and the error, DatasetNames has it), its lookups fail
// with a *DamageError (errors.Is(err, ErrDamaged)), and the other datasets
// keep serving. Installing a good snapshot (Install, e.g. re-downloaded
// from the server) clears the damage. Nothing is deleted: the damaged
// files stay for inspection until that install replaces them.

// Health is the typed state of a dataset.
type Health uint8

const (
	// Healthy: the dataset serves.
	Healthy Health = iota
	// Damaged: the dataset does not serve until a good snapshot is
	// installed over it (DatasetStatus.Err says why).
	Damaged
)

func (h Health) String() string {
	switch h {
	case Healthy:
		return "ok"
	case Damaged:
		return "damaged"
	}
	return fmt.Sprintf("Health(%d)", uint8(h))
}

// Damaged reports whether the named dataset is damaged: nil if it serves,
// a *DamageError if it is damaged (install a good snapshot over it to
// heal it), an error wrapping ErrNoDataset if the store has no such
// dataset. The sync client asks it to learn what to re-download.
func (s *Store) Damaged(name string) error {
	d, err := s.Dataset(name)
	if err != nil {
		return err
	}
	if de := d.damage.Load(); de != nil {
		return de
	}
	return nil
}

// writable returns the named dataset for a write (Apply, Truncate,
// compaction, Remap): ErrReadOnly in a read-only store, the *DamageError
// of a damaged dataset.
func (s *Store) writable(name string) (*Dataset, error) {
	if s.opts.ReadOnly {
		return nil, ErrReadOnly
	}
	return s.undamaged(name)
}

// undamaged returns the named dataset, or the *DamageError of a damaged
// one.
func (s *Store) undamaged(name string) (*Dataset, error) {
	d, err := s.Dataset(name)
	if err != nil {
		return nil, err
	}
	if de := d.damage.Load(); de != nil {
		return nil, de
	}
	return d, nil
}

// DamagedNames lists the damaged datasets, sorted.
func (s *Store) DamagedNames() []string {
	ds, _ := s.datasetList()
	var out []string
	for _, d := range ds {
		if d.damage.Load() != nil {
			out = append(out, d.name)
		}
	}
	return out
}

// markDamaged records why d is damaged (the first cause wins until an
// install clears it) and returns the *DamageError.
func (s *Store) markDamaged(d *Dataset, cause error) *DamageError {
	var de *DamageError
	if errors.As(cause, &de) && de.Dataset == d.name {
		cause = de.Err
	}
	de = &DamageError{Dataset: d.name, Err: cause}
	if d.damage.CompareAndSwap(nil, de) {
		s.opts.Logger.Error("dataset damaged; it does not serve until a good snapshot is installed", "dataset", d.name, "err", cause)
		s.metrics.damaged.Add(1)
		return de
	}
	return d.damage.Load()
}

// faultError is a memory fault (SIGBUS/SIGSEGV) that debug.SetPanicOnFault
// turned into a panic: a mapped file shrank under a reader.
type faultError interface {
	error
	Addr() uintptr
}

// reading is what a guarded method is reading: the dataset and the
// snapshot reference it holds (nil when none), so that a fault can mark
// the one damaged and release the other.
type reading struct {
	d    *Dataset
	snap *snapshot.Snapshot
	// done is set by a guarded method as it returns normally (the last
	// statement before its return): the guard then skips recover, which
	// on the lookup path cost more than the check (~13 instructions).
	done bool
}

// guard is deferred by every store method that reads mapped bytes. It
// restores the goroutine's panic-on-fault setting and turns a memory
// fault while reading r.d into a CorruptionError that marks the dataset
// damaged, in *err, releasing the reference r.snap. Any other panic is
// re-raised. The cost is a few nanoseconds per call (BENCHMARKS.md,
// "Trust").
//
//	var r reading
//	defer s.guard(debug.SetPanicOnFault(true), &r, &err)
func (s *Store) guard(old bool, r *reading, err *error) {
	debug.SetPanicOnFault(old)
	if r.done {
		return
	}
	s.faulted(recover(), r, err)
}

// guardInto is guard for GetInto, which also empties the caller's Result
// on a fault (its reference is r.snap's, which faulted releases). res is
// a parameter of its own, not a field of r: r's contents leak (a fault
// marks r.d damaged), and a Result reachable from r made every Get's
// Result a heap allocation (BENCHMARKS.md "Returning the Result").
func (s *Store) guardInto(old bool, r *reading, err *error, res *Result) {
	debug.SetPanicOnFault(old)
	if r.done {
		return
	}
	if s.faulted(recover(), r, err) {
		*res = Result{}
	}
}

// faulted is the guards' work once they have recovered p (nil: no panic):
// it reports whether p was a memory fault, which it turned into *err.
func (s *Store) faulted(p any, r *reading, err *error) bool {
	if p == nil {
		return false
	}
	fe, ok := p.(faultError)
	if !ok {
		panic(p)
	}
	s.metrics.faults.Add(1)
	if r.snap != nil {
		r.snap.Unref()
		r.snap = nil
	}
	cause := &format.CorruptionError{File: "mapped snapshot file", Offset: -1,
		Err: fmt.Errorf("memory fault at %#x reading a mapping (the file shrank or its disk failed): %w", fe.Addr(), fe)}
	if r.d == nil {
		*err = cause
		return true
	}
	*err = s.markDamaged(r.d, cause)
	return true
}

// applyGuarded is dl.Apply(recs) under the fault guard: the delta looks
// each series up in the snapshot's mapped hash and index. On a fault the
// dataset is marked damaged and the error returned (dl may then hold part
// of recs; a damaged dataset serves nothing).
func (s *Store) applyGuarded(d *Dataset, dl *delta.Delta, recs []format.Record) (n int, err error) {
	r := reading{d: d}
	defer s.guard(debug.SetPanicOnFault(true), &r, &err)
	return dl.Apply(recs), nil
}

// damagedIf marks d damaged when err holds a memory fault on a mapping
// that a recover below the guard (format's Arrow reading) turned into an
// error, and returns the *DamageError; other errors, corruption found by
// decoding included (one unreadable block: the rest serves, and the scrub
// judges the files), come back as they are.
func (s *Store) damagedIf(d *Dataset, err error) error {
	var fe faultError
	if err == nil || !errors.As(err, &fe) {
		return err
	}
	s.metrics.faults.Add(1)
	return s.markDamaged(d, err)
}
