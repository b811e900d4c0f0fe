package main

import (
	"math"
	"slices"
	"strconv"

	"gonum.org/v1/plot"
)

// valueAxis sets a up for values from lo to hi and returns the map from a
// value to its coordinate on a. The axis is linear from 0 to hi*linRoom;
// or, when the values span more than 10x, logarithmic from lo/logRoom to
// hi*logRoom. A logarithmic axis is drawn as
// a linear one of log10 of the values: plot.LogScale places the axis
// label's glyph box at the arithmetic middle of the data, which pads an
// axis that spans a few powers of ten by a wide empty margin.
func valueAxis(a *plot.Axis, lo, hi, linRoom, logRoom float64) func(float64) float64 {
	if lo > 0 && hi/lo > 10 {
		a.Min, a.Max = math.Log10(lo/logRoom), math.Log10(hi*logRoom)
		a.Tick.Marker = logTicks{}
		a.Label.Text += ", log scale"
		return math.Log10
	}
	a.Min, a.Max = 0, hi*linRoom
	a.Tick.Marker = nsTicks{}
	return func(v float64) float64 { return v }
}

// nsTicks are the default ticks of a linear axis, labelled by formatTick.
type nsTicks struct{}

func (nsTicks) Ticks(lo, hi float64) []plot.Tick {
	ts := plot.DefaultTicks{}.Ticks(lo, hi)
	for i := range ts {
		if ts[i].Label != "" {
			ts[i].Label = formatTick(ts[i].Value)
		}
	}
	return ts
}

// logTicks are the ticks of an axis of log10 of the values, from lo to hi
// in that unit: one at each multiple of a power of ten, labelled at 1, 2
// and 5 times it when the axis spans at most three powers of ten, and at
// 1 times it otherwise.
type logTicks struct{}

func (logTicks) Ticks(lo, hi float64) []plot.Tick {
	labelled := []int{1, 2, 5}
	if hi-lo > 3 {
		labelled = labelled[:1]
	}
	var ts []plot.Tick
	for e := math.Floor(lo); e <= hi; e++ {
		for m := 1; m < 10; m++ {
			v := math.Log10(float64(m)) + e
			if v < lo || v > hi {
				continue
			}
			t := plot.Tick{Value: v}
			if slices.Contains(labelled, m) {
				t.Label = formatTick(float64(m) * math.Pow(10, e))
			}
			ts = append(ts, t)
		}
	}
	return ts
}

// formatTick writes a tick's value compactly: 500, 2k, 1.5M.
func formatTick(v float64) string {
	for _, u := range []struct {
		scale  float64
		suffix string
	}{{1e9, "G"}, {1e6, "M"}, {1e3, "k"}} {
		if v >= u.scale {
			return strconv.FormatFloat(v/u.scale, 'g', 3, 64) + u.suffix
		}
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}

// formatValue writes a value in full: whole, with thousands separated, at
// 100 and above; with three significant digits below.
func formatValue(v float64) string {
	if v < 100 {
		return strconv.FormatFloat(v, 'g', 3, 64)
	}
	s := strconv.FormatInt(int64(math.Round(v)), 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
