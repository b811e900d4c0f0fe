package stats_test

import (
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/groupexec/groupexec/benchmarks/internal/stats"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		xs   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := stats.Median(c.xs); got != c.want {
			t.Errorf("stats.Median(%v) = %v, want %v", c.xs, got, c.want)
		}
	}
}

func TestProcessCPUAdvances(t *testing.T) {
	c0 := stats.ProcessCPU()
	for x := 0; stats.ProcessCPU()-c0 < 5*time.Millisecond; x++ {
		if x > 1e10 {
			t.Fatal("ProcessCPU did not advance while this process computed")
		}
	}
}
