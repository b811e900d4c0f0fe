package loadgen

import (
	"cmp"
	"math"
	"slices"
	"time"
)

// Results are the outcomes of one run.
//
// Percentiles are exact, from every sample sorted: a run of these benchmarks
// has at most a few hundred thousand requests (8 bytes of latency each), so
// there is no need for the approximation of an HDR histogram, and the
// standard library suffices.
type Results struct {
	Start    time.Time     // when request 0 was due (Open) or the run began (Closed)
	Duration time.Duration // the configured sending time
	List     []Result      // in schedule order
}

func (r *Results) sortBySchedule() {
	slices.SortStableFunc(r.List, func(a, b Result) int { return cmp.Compare(a.Scheduled, b.Scheduled) })
	for i := range r.List {
		r.List[i].Seq = i
	}
}

// OK reports whether a result is a 2xx answer.
func (r Result) OK() bool { return r.Err == nil && r.Code >= 200 && r.Code < 300 }

// Summary describes a set of results.
type Summary struct {
	N      int         // requests
	OK     int         // 2xx answers
	Errors int         // no answer: transport errors and timeouts
	Codes  map[int]int // answers by status code
	// Percentiles of latency over every request, failed ones included at
	// the time they failed (a timeout at the timeout): a failure can never
	// make the percentiles look better.
	P50, P90, P99, Max time.Duration
	// Lag percentiles: how late the generator sent. Large lags mean the
	// generator, not the server, was the bottleneck.
	LagP50, LagP99, LagMax time.Duration
	// Percentiles of Latency-Lag, the time from the actual send: what a
	// generator with coordinated omission would report. For reference only:
	// it hides the time requests spent waiting to be sent.
	SentP50, SentP99 time.Duration
	// Throughput is 2xx answers per second of the run's Duration.
	Throughput float64
}

// SuccessRate is OK/N, or 0 for no requests.
func (s Summary) SuccessRate() float64 {
	if s.N == 0 {
		return 0
	}
	return float64(s.OK) / float64(s.N)
}

// Summary summarises every result.
func (r *Results) Summary() Summary { return summarise(r.List, r.Duration) }

func summarise(list []Result, d time.Duration) Summary {
	s := Summary{N: len(list), Codes: map[int]int{}}
	lat := make([]time.Duration, 0, len(list))
	lag := make([]time.Duration, 0, len(list))
	sent := make([]time.Duration, 0, len(list))
	for _, x := range list {
		lat = append(lat, x.Latency)
		lag = append(lag, x.Lag)
		sent = append(sent, x.Latency-x.Lag)
		switch {
		case x.Err != nil:
			s.Errors++
		default:
			s.Codes[x.Code]++
			if x.OK() {
				s.OK++
			}
		}
	}
	slices.Sort(lat)
	slices.Sort(lag)
	slices.Sort(sent)
	s.P50, s.P90, s.P99 = Percentile(lat, 0.50), Percentile(lat, 0.90), Percentile(lat, 0.99)
	s.Max = Percentile(lat, 1)
	s.LagP50, s.LagP99, s.LagMax = Percentile(lag, 0.50), Percentile(lag, 0.99), Percentile(lag, 1)
	s.SentP50, s.SentP99 = Percentile(sent, 0.50), Percentile(sent, 0.99)
	if d > 0 {
		s.Throughput = float64(s.OK) / d.Seconds()
	}
	return s
}

// Percentile returns the q-quantile (0 < q <= 1) of sorted by the
// nearest-rank method: the smallest sample with at least q of the samples at
// or below it. It returns 0 for no samples.
func Percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// Bucket summarises the requests scheduled in [Start, Start+width).
type Bucket struct {
	Start time.Duration
	Summary
}

// Series cuts the results into buckets of width by scheduled time, from 0
// to the run's Duration, and summarises each; an empty bucket has N == 0.
func (r *Results) Series(width time.Duration) []Bucket {
	if width <= 0 {
		return nil
	}
	nb := int((r.Duration + width - 1) / width)
	by := make([][]Result, nb)
	for _, x := range r.List {
		if i := int(x.Scheduled / width); i >= 0 && i < nb {
			by[i] = append(by[i], x)
		}
	}
	out := make([]Bucket, nb)
	for i, l := range by {
		out[i] = Bucket{Start: time.Duration(i) * width, Summary: summarise(l, width)}
	}
	return out
}
