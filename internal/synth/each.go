package synth

// Each calls fn once per series of the dataset o describes, in the order
// WriteCSV writes them (Catalogue's order), with the series' rows: periods
// ascending as the Unix seconds of each bucket's start (UTC), and values,
// the same two-decimal numbers WriteCSV and WriteParquet write. The slices
// are reused from one call to the next. Each stops at fn's first error and
// returns it. It is how tests build an in-memory table of realistic rows
// without writing a file; memory is the longest series' rows.
func Each(o Options, fn func(s SeriesSpec, periods []int64, values []float64) error) (Stats, error) {
	p, err := newPlan(o)
	if err != nil {
		return Stats{}, err
	}
	var st Stats
	var periods []int64
	var values []float64
	s := p.newSeriesGen()
	for pos := 0; pos < p.n; pos++ {
		s.load(int(p.perm[pos]))
		periods, values = periods[:0], values[:0]
		for j := range s.length {
			periods = append(periods, bucketTime(s.f, s.first+int64(j)).Unix())
			values = append(values, float64(s.cents())/100)
			s.cur.next() // cents reads the season of the cursor's period
		}
		spec := SeriesSpec{
			ID: string(s.g.id), Name: string(s.g.name), Unit: s.g.unit, Source: s.g.source,
			Frequency: freqCode[s.f], Start: bucketTime(s.f, s.first),
			End: bucketTime(s.f, s.first+int64(s.length)-1), Length: s.length,
		}
		if err := fn(spec, periods, values); err != nil {
			return st, err
		}
		st.Rows += int64(s.length)
		st.Series++
	}
	return st, nil
}
