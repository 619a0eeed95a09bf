package localcache

import "runtime/debug"

// Has reports whether dataset holds series id, in its snapshot or in its
// delta (a series the delta created).
func (s *Store) Has(dataset, id string) (ok bool, err error) {
	d, err := s.Dataset(dataset)
	if err != nil {
		return false, err
	}
	var r reading
	defer s.guard(debug.SetPanicOnFault(true), &r, &err)
	l, ok, err := d.find(id, &r)
	if err != nil || !ok {
		return false, err
	}
	r.snap = nil
	l.rs.snap.Unref()
	return true, nil
}
