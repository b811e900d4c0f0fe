package main

import (
	"fmt"
	"image/color"
	"math"
	"slices"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// bars draws a horizontal bar per contender (per contender and
// GOMAXPROCS when perProcs) and metric, with its value written beside it.
// The value axis is logarithmic when the values span more than 10x.
func (s chartSpec) bars(series [][]point, perProcs bool, note string) ([]byte, error) {
	type cat struct {
		contender string
		procs     int
	}
	var cats []cat
	for _, ps := range series {
		for _, pt := range ps {
			if c := (cat{pt.contender, pt.procs}); !slices.Contains(cats, c) {
				cats = append(cats, c)
			}
		}
	}
	// The first category is drawn at the top: y runs upwards.
	slices.Reverse(cats)
	names := make([]string, len(cats))
	for i, c := range cats {
		names[i] = c.contender
		if perProcs {
			names[i] += ", GOMAXPROCS " + strconv.Itoa(c.procs)
		}
	}

	p := newPlot(s.title, note)
	p.X.Label.Text = s.value
	n := len(series)
	values := make([][]float64, n)
	lo, hi := math.Inf(1), math.Inf(-1)
	for mi, ps := range series {
		values[mi] = make([]float64, len(cats))
		for ci, c := range cats {
			j := slices.IndexFunc(ps, func(pt point) bool { return pt.contender == c.contender && pt.procs == c.procs })
			if j < 0 {
				return nil, fmt.Errorf("%s has no %s", names[ci], s.metrics[mi].unit)
			}
			values[mi][ci] = ps[j].median
			lo, hi = min(lo, ps[j].median), max(hi, ps[j].median)
		}
	}
	// Room on the right for the value written at the end of a bar.
	x := valueAxis(&p.X, lo, hi, 1.2, 4)
	p.Add(plotter.NewGrid())

	legend := newLegend()
	for mi, vs := range values {
		b := &hbars{
			values: vs,
			x:      x,
			color:  colour(mi),
			// The first metric is the top bar of each category.
			offset: vg.Length(float64(n-1)/2-float64(mi)) * barW,
		}
		p.Add(b)
		if n > 1 {
			legend.Add(s.metrics[mi].label+" ("+s.metrics[mi].unit+")", b)
		}
	}
	p.NominalY(names...)
	p.Y.Min, p.Y.Max = -0.5, float64(len(cats))-0.5
	h := 1.5*vg.Inch + vg.Length(len(cats))*(vg.Length(n)*barW+16)
	if n == 1 {
		return toSVG(p, nil, h)
	}
	return toSVG(p, &legend, h)
}

// hbars are horizontal bars, one per category (category i at y = i),
// drawn from the value axis' minimum, so that they also stand on an axis
// of log10 of the values, which plotter.BarChart's (drawn from 0) do not.
// Each bar's value is written in full at its end.
type hbars struct {
	values []float64
	x      func(float64) float64 // a value's coordinate on the value axis
	color  color.Color
	offset vg.Length // added to each bar's y position
}

// Plot implements plot.Plotter.
func (b *hbars) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	sty := p.X.Tick.Label
	sty.XAlign, sty.YAlign = draw.XLeft, draw.YCenter
	for i, v := range b.values {
		y := trY(float64(i)) + b.offset
		x0, x1 := trX(p.X.Min), trX(b.x(v))
		c.FillPolygon(b.color, []vg.Point{
			{X: x0, Y: y - barW/2}, {X: x1, Y: y - barW/2},
			{X: x1, Y: y + barW/2}, {X: x0, Y: y + barW/2},
		})
		c.FillText(sty, vg.Point{X: x1 + 4, Y: y}, formatValue(v))
	}
}

// Thumbnail implements plot.Thumbnailer.
func (b *hbars) Thumbnail(c *draw.Canvas) {
	r := c.Rectangle
	c.FillPolygon(b.color, []vg.Point{r.Min, {X: r.Max.X, Y: r.Min.Y}, r.Max, {X: r.Min.X, Y: r.Max.Y}})
}
