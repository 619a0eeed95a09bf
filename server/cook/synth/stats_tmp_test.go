package synth

import "testing"

func TestTmpCollisions(t *testing.T) {
	p, err := newPlan(Options{Series: 2_820_000, Rows: 136_000_000, Seed: 1, Intraday: true})
	if err != nil {
		t.Fatal(err)
	}
	var hist [40]int
	for _, v := range p.redraws {
		hist[v]++
	}
	t.Log(hist, len(p.disamb))
	for f := range p.mix {
		t.Log(freqCode[f], p.mix[f])
	}
}
