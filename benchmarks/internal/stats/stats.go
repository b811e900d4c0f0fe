// Package stats holds the small measurements the benchmark programs
// (cmd/gatewaybench, cmd/clusterbench) share.
package stats

import "slices"

// Median of xs (the mean of the middle two for an even count); 0 for none.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(xs))
	if n := len(s); n%2 == 1 {
		return s[n/2]
	}
	n := len(s)
	return (s[n/2-1] + s[n/2]) / 2
}
