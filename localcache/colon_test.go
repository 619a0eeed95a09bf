package localcache_test

import (
	"errors"
	"testing"

	"github.com/energyscope/energyscope/localcache"
	"github.com/energyscope/energyscope/localcache/format"
	"github.com/energyscope/energyscope/localcache/snapshot"
)

// colonTable has one daily series per id, every value v.
func colonTable(v float64, ids ...string) *format.Table {
	tb := &format.Table{}
	for i, id := range ids {
		tb.Series = append(tb.Series, format.SeriesMeta{ID: id, Frequency: format.Daily})
		tb.Append(uint32(i), utc("2024-01-01"), v)
	}
	return tb
}

// A ref is "dataset:id" exactly when its part before the first ':' names
// a dataset; any other ref is an id, ':' and all, looked up in every
// dataset in name order. Get (whose plain path tells the two apart by the
// datasets' name lengths, not by a scan for ':'), View, Info and Has agree.
func TestGetRefWithColon(t *testing.T) {
	home := t.TempDir()
	publish(t, home, "a", colonTable(1, "x:1", "bb:s", "zz:s", ":lead", "s"), format.WriteOptions{Epoch: 1})
	publish(t, home, "bb", colonTable(2, "s", "a:x", "q:r:t"), format.WriteOptions{Epoch: 1})
	st, err := localcache.Open(home, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, c := range []struct {
		ref     string
		dataset string // "" when not found
		value   float64
	}{
		{"x:1", "a", 1},   // no dataset "x": an id of a
		{"zz:s", "a", 1},  // no dataset "zz" (a name of length 2 exists)
		{"bb:s", "bb", 2}, // dataset bb's s, not a's "bb:s"
		{"a:x:1", "a", 1}, // dataset a's "x:1"
		{"a:s", "a", 1},   // dataset a's s, not bb's "a:x"
		{"a:x", "", 0},    // dataset a has no "x": not bb's "a:x"
		{"bb:a:x", "bb", 2},
		{"q:r:t", "bb", 2}, // no dataset "q": found in bb
		{":lead", "a", 1},  // a leading ':' names no dataset
		{"s", "a", 1},      // the first dataset in name order
		{"bb:", "", 0},
		{"b:s", "", 0},
	} {
		res, err := st.Get(c.ref, snapshot.MinTime, snapshot.MaxTime)
		if c.dataset == "" {
			if !errors.Is(err, localcache.ErrNotFound) {
				t.Errorf("Get(%q): %v, want ErrNotFound", c.ref, err)
			}
			if _, err := st.Info(c.ref); !errors.Is(err, localcache.ErrNotFound) {
				t.Errorf("Info(%q): %v, want ErrNotFound", c.ref, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("Get(%q): %v", c.ref, err)
			continue
		}
		if res.Dataset != c.dataset || res.Points.Len() != 1 || res.Points.Values[0] != c.value {
			t.Errorf("Get(%q) = dataset %s values %v, want %s [%v]", c.ref, res.Dataset, res.Points.Values, c.dataset, c.value)
		}
		res.Release()
		err = st.View(c.ref, snapshot.MinTime, snapshot.MaxTime, func(r localcache.Result) error {
			if r.Dataset != c.dataset || r.Points.Values[0] != c.value {
				t.Errorf("View(%q) = dataset %s values %v", c.ref, r.Dataset, r.Points.Values)
			}
			return nil
		})
		if err != nil {
			t.Errorf("View(%q): %v", c.ref, err)
		}
		if in, err := st.Info(c.ref); err != nil || in.Dataset != c.dataset {
			t.Errorf("Info(%q) = %s, %v", c.ref, in.Dataset, err)
		}
	}
}
