package functions

import "math"

// Grid is a result's cells, Rows x Cols, held by type rather than boxed: a year of
// daily values is a []float64, not a [][]any of boxed floats. The bridge writes a Grid
// straight to JSON; Cells boxes it for callers that want plain Go values.
//
// Cell (r, c) is at index i = r*Cols + c of both slices:
//   - Other[i], when Other is not nil and Other[i] is not nil: a string, bool or
//     *CellError (an error in that cell only; the same pointer may fill many cells);
//   - otherwise Num[i]: a finite number (a value, or a date as a serial), or NaN for an
//     empty cell. Num never holds an infinity.
//
// Other is nil when every cell is a number or empty, as in a plain ES.Get. A Grid a
// Result holds is not modified afterwards; callers must not modify it either.
type Grid struct {
	Rows, Cols int
	Num        []float64
	Other      []any
}

// smallGrid is a Grid of up to two cells in one allocation: ES.Latest answers, of which
// a batch may hold ten thousand.
type smallGrid struct {
	g   Grid
	num [2]float64
}

// newGrid returns a rows x cols grid of empty cells.
func newGrid(rows, cols int) *Grid {
	var g *Grid
	if n := rows * cols; n <= 2 {
		s := &smallGrid{g: Grid{Rows: rows, Cols: cols}}
		g = &s.g
		g.Num = s.num[:n:n]
	} else {
		g = &Grid{Rows: rows, Cols: cols, Num: make([]float64, n)}
	}
	nan := math.NaN()
	for i := range g.Num {
		g.Num[i] = nan
	}
	return g
}

// At returns cell (r, c) as Result.Value holds it: float64, string, bool, nil (empty)
// or *CellError.
func (g *Grid) At(r, c int) any { return g.at(r*g.Cols + c) }

func (g *Grid) at(i int) any {
	if g.Other != nil && g.Other[i] != nil {
		return g.Other[i]
	}
	if x := g.Num[i]; x == x {
		return x
	}
	return nil
}

// Cells returns the grid as rows of boxed cells (see At), carved from one backing slice.
func (g *Grid) Cells() [][]any {
	backing := make([]any, g.Rows*g.Cols)
	out := make([][]any, g.Rows)
	for r := range out {
		out[r] = backing[r*g.Cols : (r+1)*g.Cols : (r+1)*g.Cols]
	}
	for i := range backing {
		backing[i] = g.at(i)
	}
	return out
}

// set puts a cell given as Result.Value would hold it at index i. Numbers that are not
// finite become empty cells.
func (g *Grid) set(i int, v any) {
	switch x := v.(type) {
	case float64:
		g.setNum(i, x)
		return
	case nil:
		g.setNum(i, math.NaN())
		return
	}
	if g.Other == nil {
		g.Other = make([]any, len(g.Num))
	}
	g.Other[i] = v
	g.Num[i] = math.NaN()
}

// setNum puts a number at index i; NaN and infinities become an empty cell.
func (g *Grid) setNum(i int, x float64) {
	if math.IsInf(x, 0) {
		x = math.NaN()
	}
	g.Num[i] = x
	if g.Other != nil {
		g.Other[i] = nil
	}
}

// shaped lays cells (one per id) out in the shape of the series argument.
func shaped(ids idList, cells []any) *Grid {
	g := newGrid(ids.rows, ids.cols)
	if ids.pos == nil {
		for i, c := range cells {
			g.set(i, c)
		}
		return g
	}
	for i, k := range ids.pos {
		if k >= 0 {
			g.set(i, cells[k])
		}
	}
	return g
}
