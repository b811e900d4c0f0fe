package loadgen

import (
	"errors"
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		out := make([]time.Duration, len(v))
		for i, x := range v {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = i + 1
	}
	for _, c := range []struct {
		s    []time.Duration
		q    float64
		want time.Duration
	}{
		{nil, 0.5, 0},
		{ms(7), 0.99, 7 * time.Millisecond},
		{ms(1, 2, 3, 4), 0.5, 2 * time.Millisecond},
		{ms(1, 2, 3, 4), 0.51, 3 * time.Millisecond},
		{ms(1, 2, 3, 4), 1, 4 * time.Millisecond},
		{ms(hundred...), 0.99, 99 * time.Millisecond},
		{ms(hundred...), 0.5, 50 * time.Millisecond},
		{ms(hundred...), 0.001, 1 * time.Millisecond},
	} {
		if got := Percentile(c.s, c.q); got != c.want {
			t.Errorf("Percentile(%v, %v) = %v, want %v", c.s, c.q, got, c.want)
		}
	}
}

func TestSummaryAndSeries(t *testing.T) {
	r := &Results{Duration: 2 * time.Second}
	// Second 0: 10 answers of 200 (1..10 ms). Second 1: 5 answers of 429
	// (1 ms) and 1 timeout at 1 s. Nothing in a third bucket.
	for i := range 10 {
		r.List = append(r.List, Result{Scheduled: time.Duration(i) * 100 * time.Millisecond, Code: 200, Latency: time.Duration(i+1) * time.Millisecond})
	}
	for i := range 5 {
		r.List = append(r.List, Result{Scheduled: time.Second + time.Duration(i)*time.Millisecond, Code: 429, Latency: time.Millisecond})
	}
	r.List = append(r.List, Result{Scheduled: 1500 * time.Millisecond, Err: errors.New("timeout"), Latency: time.Second, Lag: 3 * time.Millisecond})

	s := r.Summary()
	if s.N != 16 || s.OK != 10 || s.Errors != 1 || s.Codes[200] != 10 || s.Codes[429] != 5 {
		t.Fatalf("summary %+v", s)
	}
	if s.Max != time.Second || s.P99 != time.Second || s.P50 != 3*time.Millisecond {
		t.Errorf("max %v p99 %v p50 %v, want 1s 1s 3ms", s.Max, s.P99, s.P50)
	}
	if s.LagMax != 3*time.Millisecond || s.LagP50 != 0 {
		t.Errorf("lag max %v p50 %v", s.LagMax, s.LagP50)
	}
	if s.SentP99 != time.Second-3*time.Millisecond || s.SentP50 != 3*time.Millisecond {
		t.Errorf("from-send p99 %v p50 %v, want 997ms 3ms", s.SentP99, s.SentP50)
	}
	if s.Throughput != 5 {
		t.Errorf("throughput %v, want 10 OK / 2s", s.Throughput)
	}
	if got := s.SuccessRate(); got != 10.0/16 {
		t.Errorf("success rate %v", got)
	}

	b := r.Series(time.Second)
	if len(b) != 2 {
		t.Fatalf("%d buckets, want 2", len(b))
	}
	if b[0].Start != 0 || b[0].N != 10 || b[0].OK != 10 || b[0].P99 != 10*time.Millisecond || b[0].Throughput != 10 {
		t.Errorf("bucket 0: %+v", b[0])
	}
	if b[1].Start != time.Second || b[1].N != 6 || b[1].OK != 0 || b[1].Errors != 1 || b[1].P50 != time.Millisecond || b[1].P99 != time.Second {
		t.Errorf("bucket 1: %+v", b[1])
	}
	if b := r.Series(1500 * time.Millisecond); len(b) != 2 || b[1].N != 1 {
		t.Errorf("1.5s buckets: %+v", b)
	}
	if (&Results{}).Summary().SuccessRate() != 0 {
		t.Error("empty success rate")
	}
}
