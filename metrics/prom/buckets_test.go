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
