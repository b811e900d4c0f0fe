package main

import (
	"bufio"
	"fmt"
	"html"
	"io"
	"math"
	"runtime"
	"strings"
	"time"

	"github.com/groupexec/groupexec/benchmarks/loadgen"
)

// chart is the isolation chart: one panel per run, each with the heavy and
// light tenants' p50 (dashed) and p99 (solid) latency per bucket, on a
// logarithmic axis shared by the panels so that they compare at a glance.
// It is plain SVG written by hand: no plotting library is needed for a few
// polylines.
type chart struct {
	Title    string
	Bucket   time.Duration
	Duration time.Duration
	Panels   []panel
}

type panel struct {
	Name         string
	Note         string
	Heavy, Light []loadgen.Bucket
	Guide        time.Duration // a dotted line (2x the light tenant's p99 alone); 0 for none
}

const (
	chartW  = 960
	panelH  = 280
	marginL = 80
	marginR = 20
	headH   = 70 // title and legend
	panelT  = 44 // panel name and note above each plot
	axisB   = 36 // x axis labels below each plot
)

var (
	heavyColour = "#d62728"
	lightColour = "#1f77b4"
)

func (c chart) write(w io.Writer) error {
	lo, hi := c.yRange()
	plotW := float64(chartW - marginL - marginR)
	plotH := float64(panelH - panelT - axisB)
	height := headH + len(c.Panels)*panelH
	b := bufio.NewWriter(w)
	fmt.Fprintf(b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n",
		chartW, height, chartW, height)
	fmt.Fprintf(b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(b, `<text x="%d" y="22" font-size="16" font-weight="bold">%s</text>`+"\n", marginL, esc(c.Title))
	fmt.Fprintf(b, `<text x="%d" y="40" fill="#444">latency per %v bucket of scheduled send time (log scale); requests that failed count at the time they failed</text>`+"\n", marginL, c.Bucket)
	legend := []struct {
		label, colour, dash string
	}{{"heavy p99", heavyColour, ""}, {"heavy p50", heavyColour, "5,4"}, {"light p99", lightColour, ""}, {"light p50", lightColour, "5,4"}, {"2x light p99 alone", "#888", "2,3"}}
	for i, l := range legend {
		x := marginL + i*150
		fmt.Fprintf(b, `<line x1="%d" y1="58" x2="%d" y2="58" stroke="%s" stroke-width="2" stroke-dasharray="%s"/>`, x, x+28, l.colour, l.dash)
		fmt.Fprintf(b, `<text x="%d" y="62">%s</text>`+"\n", x+34, esc(l.label))
	}

	secs := c.Duration.Seconds()
	xOf := func(t time.Duration) float64 { return marginL + plotW*t.Seconds()/secs }
	for pi, p := range c.Panels {
		top := float64(headH + pi*panelH + panelT)
		yOf := func(d time.Duration) float64 {
			v := math.Log10(math.Max(float64(d)/float64(time.Millisecond), lo))
			return top + plotH*(1-(v-math.Log10(lo))/(math.Log10(hi)-math.Log10(lo)))
		}
		fmt.Fprintf(b, `<text x="%d" y="%.0f" font-weight="bold">%s</text>`+"\n", marginL, top-24, esc(p.Name))
		fmt.Fprintf(b, `<text x="%d" y="%.0f" fill="#444">%s</text>`+"\n", marginL, top-8, esc(p.Note))
		fmt.Fprintf(b, `<rect x="%d" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="#000"/>`+"\n", marginL, top, plotW, plotH)
		// y grid: every decade
		for e := math.Round(math.Log10(lo)); e <= math.Round(math.Log10(hi)); e++ {
			v := math.Pow(10, e)
			y := yOf(time.Duration(v * float64(time.Millisecond)))
			fmt.Fprintf(b, `<line x1="%d" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`, marginL, y, marginL+plotW, y)
			fmt.Fprintf(b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", marginL-6, y+4, msLabel(v))
		}
		// x ticks: every second, labelled every few
		step := max(1, int(math.Ceil(secs/10)))
		for s := 0; float64(s) <= secs; s += step {
			x := xOf(time.Duration(s) * time.Second)
			fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#000"/>`, x, top+plotH, x, top+plotH+4)
			fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle">%ds</text>`+"\n", x, top+plotH+16, s)
		}
		if p.Guide > 0 {
			y := yOf(p.Guide)
			fmt.Fprintf(b, `<line x1="%d" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#888" stroke-dasharray="2,3"/>`+"\n", marginL, y, marginL+plotW, y)
		}
		for _, s := range []struct {
			buckets []loadgen.Bucket
			colour  string
		}{{p.Heavy, heavyColour}, {p.Light, lightColour}} {
			for _, q := range []struct {
				get  func(loadgen.Bucket) time.Duration
				dash string
			}{{func(k loadgen.Bucket) time.Duration { return k.P99 }, ""}, {func(k loadgen.Bucket) time.Duration { return k.P50 }, "5,4"}} {
				writeLine(b, s.buckets, c.Bucket, xOf, yOf, q.get, s.colour, q.dash)
			}
		}
	}
	fmt.Fprintln(b, "</svg>")
	return b.Flush()
}

// writeLine draws one series as polylines through the bucket midpoints,
// broken where a bucket is empty.
func writeLine(w io.Writer, bs []loadgen.Bucket, width time.Duration, xOf, yOf func(time.Duration) float64,
	get func(loadgen.Bucket) time.Duration, colour, dash string) {
	var pts []string
	flush := func() {
		if len(pts) > 0 {
			fmt.Fprintf(w, `<polyline fill="none" stroke="%s" stroke-width="1.8" stroke-dasharray="%s" points="%s"/>`+"\n",
				colour, dash, strings.Join(pts, " "))
		}
		pts = pts[:0]
	}
	for _, k := range bs {
		if k.N == 0 {
			flush()
			continue
		}
		pts = append(pts, fmt.Sprintf("%.1f,%.1f", xOf(k.Start+width/2), yOf(get(k))))
	}
	flush()
}

// yRange returns the y axis's decades in milliseconds, covering every value.
func (c chart) yRange() (lo, hi float64) {
	lo, hi = math.Inf(1), 0
	see := func(d time.Duration) {
		if v := float64(d) / float64(time.Millisecond); v > 0 {
			lo, hi = math.Min(lo, v), math.Max(hi, v)
		}
	}
	for _, p := range c.Panels {
		see(p.Guide)
		for _, bs := range [][]loadgen.Bucket{p.Heavy, p.Light} {
			for _, k := range bs {
				if k.N > 0 {
					see(k.P50)
					see(k.P99)
				}
			}
		}
	}
	if hi == 0 {
		return 0.1, 1000
	}
	lo = math.Pow(10, math.Floor(math.Log10(lo)))
	hi = math.Pow(10, math.Ceil(math.Log10(hi)))
	if hi <= lo {
		hi = lo * 10
	}
	return lo, hi
}

func msLabel(v float64) string {
	switch {
	case v >= 1000:
		return fmt.Sprintf("%gs", v/1000)
	default:
		return fmt.Sprintf("%gms", v)
	}
}

func esc(s string) string { return html.EscapeString(s) }

func gomaxprocs() int { return runtime.GOMAXPROCS(0) }
