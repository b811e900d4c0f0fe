package main

import (
	"fmt"
	"math"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// lines draws a line per contender (per contender and metric when there
// are several) against GOMAXPROCS, on a logarithmic GOMAXPROCS axis; the
// value axis is logarithmic too when the values span more than 10x.
func (s chartSpec) lines(series [][]point, procs []int, note string) ([]byte, error) {
	p := newPlot(s.title, note)
	p.X.Label.Text = "GOMAXPROCS"
	var ticks plot.ConstantTicks
	for _, n := range procs {
		ticks = append(ticks, plot.Tick{Value: math.Log10(float64(n)), Label: strconv.Itoa(n)})
	}
	p.X.Tick.Marker = ticks
	p.X.Min = math.Log10(float64(procs[0]) / 1.25)
	p.X.Max = math.Log10(float64(procs[len(procs)-1]) * 1.25)
	p.Y.Label.Text = s.value
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, ps := range series {
		for _, pt := range ps {
			lo, hi = min(lo, pt.median), max(hi, pt.median)
		}
	}
	y := valueAxis(&p.Y, lo, hi, 1.08, 1.25)
	p.Add(plotter.NewGrid())

	legend := newLegend()
	i := 0
	for mi, ps := range series {
		for _, c := range contenders(ps) {
			var xys plotter.XYs
			for _, pt := range ps {
				if pt.contender == c {
					xys = append(xys, plotter.XY{X: math.Log10(float64(pt.procs)), Y: y(pt.median)})
				}
			}
			l, sc, err := plotter.NewLinePoints(xys)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", c, err)
			}
			l.Color = colour(i)
			l.Width = vg.Points(1.5)
			l.Dashes = plotutil.Dashes(mi)
			sc.Color = colour(i)
			sc.Shape = plotutil.Shape(i)
			sc.Radius = vg.Points(3)
			p.Add(l, sc)
			legend.Add(s.seriesName(c, mi), l, sc)
			i++
		}
	}
	return toSVG(p, &legend, lineH)
}

// seriesName names a series in the legend: the contender, and the
// metric when the chart has several.
func (s chartSpec) seriesName(contender string, metric int) string {
	if len(s.metrics) == 1 {
		return contender
	}
	return contender + " " + s.metrics[metric].label
}
