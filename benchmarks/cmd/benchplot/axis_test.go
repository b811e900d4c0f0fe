package main

import (
	"math"
	"slices"
	"testing"
)

func TestFormatValue(t *testing.T) {
	for v, want := range map[float64]string{
		0.5: "0.5", 25.8: "25.8", 99.94: "99.9", 100: "100", 715.2: "715",
		1377: "1,377", 77113498: "77,113,498", 1e9: "1,000,000,000",
	} {
		if got := formatValue(v); got != want {
			t.Errorf("formatValue(%v) = %q, want %q", v, got, want)
		}
	}
}

func TestFormatTick(t *testing.T) {
	for v, want := range map[float64]string{
		0.5: "0.5", 50: "50", 500: "500", 1000: "1k", 1500: "1.5k", 2e5: "200k", 1e6: "1M", 3e9: "3G",
	} {
		if got := formatTick(v); got != want {
			t.Errorf("formatTick(%v) = %q, want %q", v, got, want)
		}
	}
}

func TestLogTicks(t *testing.T) {
	labels := func(lo, hi float64) (ls []string, n int) {
		for _, tk := range (logTicks{}).Ticks(math.Log10(lo), math.Log10(hi)) {
			if tk.Label != "" {
				ls = append(ls, tk.Label)
			}
			n++
		}
		return ls, n
	}
	ls, n := labels(30, 1100)
	if want := []string{"50", "100", "200", "500", "1k"}; !slices.Equal(ls, want) {
		t.Errorf("labels from 30 to 1,100 = %q, want %q", ls, want)
	}
	if n != 17 { // 30..90, 100..900, 1000
		t.Errorf("ticks from 30 to 1,100 = %d, want 17", n)
	}
	if ls, _ = labels(2000, 3e8); !slices.Equal(ls, []string{"10k", "100k", "1M", "10M", "100M"}) {
		t.Errorf("labels from 2,000 to 300M = %q, want powers of ten only", ls)
	}
}
