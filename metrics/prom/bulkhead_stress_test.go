package prom_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/groupexec/groupexec/bulkhead"
	"github.com/groupexec/groupexec/clock"
	"github.com/groupexec/groupexec/metrics/prom"
)

// Under acquires that wait, time out, are cancelled as they wait or as
// they are served, find the queue full or the limit draining, beside a
// limit that changes and a listener after the exporter that panics now and
// then, the exporter counts each request once: acquired_total plus every
// code of rejected_total is the requests made, each code the refusals the
// callers saw with it (less the requests issued a permit as they gave up,
// which count as acquired), scrapes meanwhile never see a counter go back,
// and once idle the gauges read 0 in flight and 0 queued.
func TestBulkheadCountsEachRequestOnceUnderStress(t *testing.T) {
	goroutines, ops := 32, 150
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	m := prom.NewBulkhead("s", "")
	var givenBack, heard atomic.Int64
	b, err := bulkhead.New(3, bulkhead.WithClock(clk), bulkhead.WithQueue(4, 5*time.Millisecond),
		bulkhead.WithListener(bulkhead.Listeners(m, bulkhead.ListenerFunc(func(e bulkhead.Event) {
			if e.Code == bulkhead.EventRequestRejected && e.PermitID != 0 {
				givenBack.Add(1)
			}
			if heard.Add(1)%5 == 0 {
				panic("a listener after the exporter fails")
			}
		}))))
	if err != nil {
		t.Fatal(err)
	}
	m.Observe(b)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m)

	var requests atomic.Int64
	var mu sync.Mutex
	refusedBy := map[string]int64{} // the callers' refusals, by the code they count under
	codeOf := func(err error) string {
		var coded interface{ Code() string }
		switch {
		case errors.As(err, &coded):
			return coded.Code()
		case errors.Is(err, context.Canceled):
			return "cancelled"
		case errors.Is(err, context.DeadlineExceeded):
			return "deadline_exceeded"
		}
		return "other"
	}
	var scrapeMu sync.Mutex
	last := map[string]float64{}
	scrape := func() {
		scrapeMu.Lock()
		defer scrapeMu.Unlock()
		for _, code := range []string{"RB_ERR_AT_CAPACITY", "RB_ERR_QUEUE_SATURATED", "RB_ERR_QUEUE_TIMEOUT", "RB_ERR_DRAINING", "cancelled", "other"} {
			v := mustValue(t, reg, "bulkhead_rejected_total", map[string]string{"bulkhead": "s", "code": code})
			if v < last[code] {
				t.Errorf("bulkhead_rejected_total{code=%q} went back from %v to %v", code, last[code], v)
			}
			last[code] = v
		}
		if v := mustValue(t, reg, "bulkhead_in_flight_permits", map[string]string{"bulkhead": "s"}); v < 0 {
			t.Errorf("bulkhead_in_flight_permits = %v", v)
		}
	}

	// Every worker may wait in the queue holding permits: the clock moves
	// on its own too, so that their maximum waits end.
	stop := make(chan struct{})
	ticked := make(chan struct{})
	go func() {
		defer close(ticked)
		for {
			select {
			case <-stop:
				return
			default:
				clk.Advance(time.Millisecond)
				runtime.Gosched()
			}
		}
	}()
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 3))
			var held []bulkhead.Permit // released a few operations later, so that requests wait
			defer func() {
				for _, p := range held {
					if err := b.Release(p); err != nil {
						t.Errorf("Release(%d): %v", p.ID(), err)
					}
				}
			}()
			for range ops {
				if len(held) > 0 && rng.IntN(3) == 0 {
					if err := b.Release(held[0]); err != nil {
						t.Errorf("Release(%d): %v", held[0].ID(), err)
					}
					held = held[1:]
				}
				switch op := rng.IntN(20); {
				case op < 14:
					ctx, cancel := context.WithCancel(context.Background())
					if rng.IntN(3) == 0 {
						go cancel() // as it waits, or as it is served
					}
					requests.Add(1)
					var p bulkhead.Permit
					var err error
					if op < 3 {
						p, err = b.TryAcquire(ctx, 1+rng.IntN(2))
					} else {
						p, err = b.Acquire(ctx, 1+rng.IntN(2))
					}
					if err != nil {
						mu.Lock()
						refusedBy[codeOf(err)]++
						mu.Unlock()
					} else {
						held = append(held, p)
					}
					cancel()
				case op < 17:
					clk.Advance(time.Duration(rng.IntN(4)) * time.Millisecond)
				case op < 19:
					scrape()
				default:
					_ = b.SetLimit(1 + rng.IntN(4))
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	<-ticked
	if err := b.SetLimit(3); err != nil {
		t.Fatal(err)
	}

	// A timer that times a waiter out tells the listeners on its own
	// goroutine, after it has woken the waiter: the books may take a
	// moment to agree, which no clock of the test's decides.
	agree := func() []string {
		var bad []string
		sum := mustValue(t, reg, "bulkhead_acquired_total", map[string]string{"bulkhead": "s"})
		mu.Lock()
		defer mu.Unlock()
		for code, n := range refusedBy {
			want := float64(n)
			if code == "cancelled" {
				want -= float64(givenBack.Load()) // counted as acquired
			}
			got := mustValue(t, reg, "bulkhead_rejected_total", map[string]string{"bulkhead": "s", "code": code})
			sum += got
			if got != want {
				bad = append(bad, fmt.Sprintf("rejected_total{code=%q} = %v, the callers saw %v", code, got, want))
			}
		}
		if sum != float64(requests.Load()) {
			bad = append(bad, fmt.Sprintf("acquired and rejected sum to %v, %d requests made", sum, requests.Load()))
		}
		return bad
	}
	for deadline := time.Now().Add(10 * time.Second); len(agree()) != 0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	for _, msg := range agree() {
		t.Error(msg)
	}
	for _, name := range []string{"bulkhead_in_flight_permits", "bulkhead_queue_depth"} {
		if v := mustValue(t, reg, name, map[string]string{"bulkhead": "s"}); v != 0 {
			t.Errorf("%s = %v once idle", name, v)
		}
	}
	scrape()
	t.Logf("requests %d, refused %v, given back %d", requests.Load(), refusedBy, givenBack.Load())
}
