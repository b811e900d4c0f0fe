package main

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// kind is the shape of a chart.
type kind int

const (
	// byProcs draws one line per contender against GOMAXPROCS, or a bar
	// per contender when the output has a single GOMAXPROCS.
	byProcs kind = iota
	// bars draws a bar per contender and metric (per contender and
	// GOMAXPROCS when the output has several).
	bars
)

// metric is one value that a benchmark reports.
type metric struct {
	unit  string // as the benchmark line writes it: "ns/op", "p50-ns/cold-start"
	label string // its name in the legend when a chart has several metrics
}

// chartSpec is one chart: the output it is drawn from and how.
type chartSpec struct {
	file    string // the `go test -bench` output in the results folder; the chart is file.svg
	bench   string // the benchmark function, whose sub-benchmarks are the contenders
	kind    kind
	metrics []metric
	title   string
	value   string // the label of the value axis, with its unit
}

const (
	chartW  = 10 * vg.Inch
	lineH   = 5.5 * vg.Inch
	barW    = 12 // points: one bar's thickness
	legendT = 40 // points from the top to the legend, below the title
	margin  = 8  // points around the chart
)

// palette is the colour of each series in turn (wraps past the end).
var palette = []color.Color{
	color.RGBA{0x1f, 0x77, 0xb4, 0xff},
	color.RGBA{0xd6, 0x27, 0x28, 0xff},
	color.RGBA{0x2c, 0xa0, 0x2c, 0xff},
	color.RGBA{0xff, 0x7f, 0x0e, 0xff},
	color.RGBA{0x94, 0x67, 0xbd, 0xff},
	color.RGBA{0x8c, 0x56, 0x4b, 0xff},
	color.RGBA{0xe3, 0x77, 0xc2, 0xff},
	color.RGBA{0x7f, 0x7f, 0x7f, 0xff},
	color.RGBA{0x17, 0xbe, 0xcf, 0xff},
	color.RGBA{0xbc, 0xbd, 0x22, 0xff},
}

func colour(i int) color.Color { return palette[i%len(palette)] }

// The text is set in Liberation Sans, whose widths are Arial's and
// Helvetica's: the SVG names those as fallbacks (sansFallback), so that a
// viewer without Liberation fonts lays the text out as it was measured.
func init() {
	plot.DefaultFont = font.Font{Typeface: "Liberation", Variant: "Sans"}
}

var sansFallback = []byte("font-family:Liberation Sans,Arial,Helvetica,sans-serif;")

// render draws the chart from res and returns its SVG.
func (s chartSpec) render(res *results) ([]byte, error) {
	series := make([][]point, len(s.metrics))
	var procs []int
	for i, m := range s.metrics {
		series[i] = res.points(s.bench, m.unit)
		if len(series[i]) == 0 {
			return nil, fmt.Errorf("no %s/... result reports %s", s.bench, m.unit)
		}
		for _, p := range series[i] {
			if !slices.Contains(procs, p.procs) {
				procs = append(procs, p.procs)
			}
		}
	}
	slices.Sort(procs)
	note := runsNote(series)
	if len(res.cpus) > 0 {
		note += ", cpu: " + strings.Join(res.cpus, " / ")
	}
	if s.kind == byProcs && len(procs) > 1 {
		return s.lines(series, procs, note)
	}
	if len(procs) == 1 {
		note += ", GOMAXPROCS " + strconv.Itoa(procs[0])
	}
	return s.bars(series, len(procs) > 1, note)
}

// runsNote says over how many runs the medians are taken.
func runsNote(series [][]point) string {
	lo, hi := math.MaxInt, 0
	for _, ps := range series {
		for _, p := range ps {
			lo, hi = min(lo, p.runs), max(hi, p.runs)
		}
	}
	if lo == hi {
		return fmt.Sprintf("median of %d runs", lo)
	}
	return fmt.Sprintf("median of %d to %d runs", lo, hi)
}

// contenders returns the distinct contenders of ps in order.
func contenders(ps []point) []string {
	var cs []string
	for _, p := range ps {
		if !slices.Contains(cs, p.contender) {
			cs = append(cs, p.contender)
		}
	}
	return cs
}

func newPlot(title, note string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title + "\n" + note
	p.Title.Padding = vg.Points(8)
	return p
}

func newLegend() plot.Legend {
	l := plot.NewLegend()
	l.Top, l.Left = true, true
	return l
}

// toSVG draws p with legend (if not nil) in a column on its right.
func toSVG(p *plot.Plot, legend *plot.Legend, h vg.Length) ([]byte, error) {
	c := vgsvg.New(chartW, h)
	dc := draw.New(c)
	area := draw.Crop(dc, margin, -margin, margin, -margin)
	if legend != nil {
		lw := legend.Rectangle(dc).Size().X + 2*margin
		area = draw.Crop(area, 0, -lw, 0, 0)
		legend.Draw(draw.Crop(dc, chartW-lw, 0, 0, -legendT))
	}
	p.Draw(area)
	var buf bytes.Buffer
	if _, err := c.WriteTo(&buf); err != nil {
		return nil, err
	}
	return bytes.ReplaceAll(buf.Bytes(), []byte("font-family:Liberation Sans;"), sansFallback), nil
}
