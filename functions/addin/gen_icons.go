//go:build ignore

// gen_icons draws the add-in's icons: a rising line on a blue rounded
// square, at the sizes Office asks for (16, 32 and 80 for the ribbon, 32
// and 64 for IconUrl and HighResolutionIconUrl). Run with go generate.
package main

import (
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math"
	"os"
)

func main() {
	for _, s := range []int{16, 32, 64, 80} {
		if err := write(fmt.Sprintf("icons/icon-%d.png", s), draw(s)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
}

var (
	bg   = color.NRGBA{0x0f, 0x6c, 0xbd, 0xff}
	line = [][2]float64{{0.16, 0.70}, {0.38, 0.46}, {0.58, 0.60}, {0.84, 0.28}}
)

// draw renders at 4x4 samples per pixel.
func draw(s int) *image.NRGBA {
	img := image.NewNRGBA(image.Rect(0, 0, s, s))
	const ss = 4
	r := 0.18 // corner radius, fraction of size
	w := math.Max(0.09, 1.6/float64(s))
	for y := 0; y < s; y++ {
		for x := 0; x < s; x++ {
			var inBG, inLine int
			for sy := 0; sy < ss; sy++ {
				for sx := 0; sx < ss; sx++ {
					px := (float64(x) + (float64(sx)+0.5)/ss) / float64(s)
					py := (float64(y) + (float64(sy)+0.5)/ss) / float64(s)
					if inRounded(px, py, r) {
						inBG++
						if nearLine(px, py, w/2) {
							inLine++
						}
					}
				}
			}
			n := float64(ss * ss)
			a := float64(inBG) / n
			l := 0.0
			if inBG > 0 {
				l = float64(inLine) / float64(inBG)
			}
			mix := func(c uint8) uint8 { return uint8(math.Round(float64(c)*(1-l) + 255*l)) }
			img.SetNRGBA(x, y, color.NRGBA{mix(bg.R), mix(bg.G), mix(bg.B), uint8(math.Round(255 * a))})
		}
	}
	return img
}

func inRounded(x, y, r float64) bool {
	cx := math.Min(math.Max(x, r), 1-r)
	cy := math.Min(math.Max(y, r), 1-r)
	return (x-cx)*(x-cx)+(y-cy)*(y-cy) <= r*r
}

func nearLine(x, y, hw float64) bool {
	for i := 0; i+1 < len(line); i++ {
		ax, ay := line[i][0], line[i][1]
		bx, by := line[i+1][0], line[i+1][1]
		dx, dy := bx-ax, by-ay
		t := ((x-ax)*dx + (y-ay)*dy) / (dx*dx + dy*dy)
		t = math.Min(1, math.Max(0, t))
		qx, qy := ax+t*dx-x, ay+t*dy-y
		if qx*qx+qy*qy <= hw*hw {
			return true
		}
	}
	return false
}

func write(path string, img image.Image) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := (&png.Encoder{CompressionLevel: png.BestCompression}).Encode(f, img); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
