package prom_test

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/metrics/prom"
)

// Buckets out of increasing order (or NaN) are refused by New, naming
// Options.Buckets and the values, as prometheus.NewHistogram refuses them:
// a histogram vector checks its buckets only when its first series is made,
// in the listener, where the executor recovers the panic and every
// queued and run time would be dropped without a word. So is +Inf alone,
// as metrics/otel refuses it: dropped, it would leave no bound.
func TestInvalidBucketsPanicInNew(t *testing.T) {
	for _, b := range [][]float64{{1, .5}, {1, 1}, {math.NaN()}, {.1, math.NaN(), 1}, {math.Inf(1)}} {
		func() {
			defer func() {
				r := recover()
				if msg := fmt.Sprint(r); r == nil || !strings.Contains(msg, "Options.Buckets") || !strings.Contains(msg, fmt.Sprint(b)) {
					t.Errorf("Buckets %v: New panicked with %v; want a panic naming Options.Buckets and the values", b, r)
				}
			}()
			prom.New(prom.Options{Buckets: b})
		}()
	}
	for _, b := range [][]float64{nil, {}, {.5}, {.1, 1, math.Inf(1)}, prometheus.DefBuckets} {
		c := prom.New(prom.Options{Buckets: b})
		c.OnStarted(executor.Event{Group: "a"})
	}
}

// New keeps its own copy of Options.Buckets, the bounds it checked: a
// caller that reuses its slice afterwards changes neither the histograms of
// groups first seen later, whose bounds would differ from the first
// groups', nor their validity, which prometheus checks only as each
// group's series is made, in the listener.
func TestBucketsCopiedInNew(t *testing.T) {
	b := []float64{.1, .2, .3}
	c := prom.New(prom.Options{Buckets: b})
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	b[0], b[1] = 5, 4 // out of order, and other bounds
	c.OnStarted(executor.Event{Group: "a"})
	m := metricOf(t, reg, "group_queued_seconds", "a")
	if m == nil {
		t.Fatal("no group_queued_seconds{group=\"a\"}: the observation was lost")
	}
	var got []float64
	for _, bk := range m.GetHistogram().GetBucket() {
		got = append(got, bk.GetUpperBound())
	}
	if fmt.Sprint(got) != "[0.1 0.2 0.3]" {
		t.Errorf("bucket bounds %v, want those given to New, [0.1 0.2 0.3]", got)
	}
}
