package breaker_test

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groupexec/groupexec/breaker"
)

// TestLateOutcomesDoNotCountUnderContention: outcomes of requests admitted
// before a trip (closed), failures mostly, and the failure of a probe left
// over from the recovery (half-open) arrive concurrently with the new closed period's successes.
// None may count there, nor trip the breaker, nor be reported; the new
// period's counts are exactly its own successes; the leftover probe gives
// its slot back.
func TestLateOutcomesDoNotCountUnderContention(t *testing.T) {
	const (
		late       = 64 // closed requests still running when the breaker trips
		goroutines = 8  // of the new period
		calls      = 200
	)
	for _, spread := range []bool{false, true} {
		for _, interval := range []time.Duration{0, time.Hour} {
			t.Run(fmt.Sprintf("spread=%v,interval=%v", spread, interval), func(t *testing.T) {
				clk := &fakeClock{}
				var rec recorder
				cb := mustNew(t, breaker.Settings{
					MaxRequests:   2,
					Timeout:       time.Second,
					Interval:      interval,
					Clock:         clk,
					ReadyToTrip:   func(c breaker.Counts) bool { return c.ConsecutiveFailures >= 1 },
					OnStateChange: rec.record,
				})
				if spread {
					breaker.Spread(cb)
				}
				old := make([]breaker.Ticket, late)
				oldDone := make([]func(bool), late)
				for i := range late {
					var err error
					if i%2 == 0 {
						old[i], err = cb.AllowTicket()
					} else {
						oldDone[i], err = cb.Allow()
					}
					wantErr(t, err, nil)
				}
				wantErr(t, run(cb, false), errBoom) // trips
				clk.Advance(time.Second)
				p1, err := cb.AllowTicket()
				wantErr(t, err, nil)
				leftover, err := cb.AllowTicket()
				wantErr(t, err, nil)
				p1.Success() // gives its slot back
				p3, err := cb.AllowTicket()
				wantErr(t, err, nil)
				p3.Success() // the second consecutive success: closed
				wantState(t, cb, breaker.StateClosed)
				if got, want := rec.take(), []string{"closed->open", "open->half-open", "half-open->closed"}; !equal(got, want) {
					t.Fatalf("transitions %v, want %v", got, want)
				}

				start := make(chan struct{})
				var wg sync.WaitGroup
				var refused atomic.Int64
				for g := range goroutines {
					wg.Add(1)
					go func() {
						defer wg.Done()
						<-start
						for i := range calls {
							var err error
							switch i % 3 {
							case 0:
								err = run(cb, true)
							case 1:
								var done func(bool)
								if done, err = cb.Allow(); err == nil {
									done(true)
								}
							default:
								var tk breaker.Ticket
								if tk, err = cb.AllowTicket(); err == nil {
									tk.Success()
								}
							}
							if err != nil {
								refused.Add(1)
							}
							if i%16 == g%16 {
								runtime.Gosched()
							}
						}
					}()
				}
				for i := range late {
					wg.Add(1)
					go func() {
						defer wg.Done()
						<-start
						switch {
						case oldDone[i] != nil:
							oldDone[i](i%4 == 1)
						case i%4 == 0:
							old[i].Success()
						default:
							old[i].Failure()
						}
					}()
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					leftover.Failure()
				}()
				close(start)
				wg.Wait()

				if n := refused.Load(); n != 0 {
					t.Fatalf("%d requests of the new period refused", n)
				}
				if got := rec.take(); len(got) != 0 {
					t.Fatalf("late outcomes made transitions %v", got)
				}
				n := uint64(goroutines * calls)
				wantCounts(t, cb, breaker.Counts{Requests: n, TotalSuccesses: n, ConsecutiveSuccesses: n})
				// Both probe slots are free: trip, and two probes get in.
				wantErr(t, run(cb, false), errBoom)
				clk.Advance(time.Second)
				a, err := cb.AllowTicket()
				wantErr(t, err, nil)
				b, err := cb.AllowTicket()
				if err != nil {
					t.Fatalf("second probe: %v; the leftover probe kept its slot", err)
				}
				a.Ignore()
				b.Ignore()
			})
		}
	}
}

// TestConcurrentInvariantsWithSteppingClock is TestConcurrentInvariants'
// check of the exact invariants with a clock that one goroutine steps back
// and forth while the others move it on: at most MaxRequests probes in
// flight, TotalSuccesses + TotalFailures <= Requests, one report per
// transition along a path, and every probe slot back at the end.
func TestConcurrentInvariantsWithSteppingClock(t *testing.T) {
	const (
		goroutines  = 64
		maxRequests = 2
	)
	calls := 2000
	if testing.Short() {
		calls = 200
	}
	for _, interval := range []time.Duration{0, 50 * time.Microsecond} {
		t.Run(fmt.Sprintf("interval=%v", interval), func(t *testing.T) {
			clk := &fakeClock{}
			clk.Set(time.Hour)
			var edges [3][3]atomic.Int64
			cb := mustNew(t, breaker.Settings{
				MaxRequests:   maxRequests,
				Interval:      interval,
				Timeout:       20 * time.Microsecond,
				Clock:         clk,
				ReadyToTrip:   func(c breaker.Counts) bool { return c.ConsecutiveFailures >= 2 },
				OnStateChange: func(_ string, from, to breaker.State) { edges[from][to].Add(1) },
			})
			var inFlight, violations atomic.Int64
			fail := func(format string, args ...any) {
				if violations.Add(1) <= 10 {
					t.Errorf(format, args...)
				}
			}
			stop := make(chan struct{})
			stepped := make(chan struct{})
			go func() { // steps the clock back and forth by up to 100µs
				defer close(stepped)
				r := rand.New(rand.NewPCG(1, 2))
				for {
					select {
					case <-stop:
						return
					default:
					}
					clk.Advance(time.Duration(r.IntN(200)-100) * time.Microsecond)
					runtime.Gosched()
				}
			}()
			var wg sync.WaitGroup
			for g := range goroutines {
				wg.Add(1)
				go func() {
					defer wg.Done()
					r := rand.New(rand.NewPCG(uint64(g), 3))
					for i := range calls {
						clk.Advance(time.Microsecond)
						ok := r.IntN(3) != 0
						if i%2 == 0 {
							_, _ = breaker.Execute(cb, func() (int, error) {
								if ok {
									return 0, nil
								}
								return 0, errBoom
							})
						} else if tk, err := cb.AllowTicket(); err == nil {
							if tk.Probe() {
								if n := inFlight.Add(1); n > maxRequests {
									fail("%d probes in flight, MaxRequests %d", n, maxRequests)
								}
								runtime.Gosched()
								inFlight.Add(-1)
							}
							switch {
							case r.IntN(8) == 0:
								tk.Ignore()
							case ok:
								tk.Success()
							default:
								tk.Failure()
							}
						} else {
							runtime.Gosched()
						}
						if c := cb.Counts(); c.TotalSuccesses+c.TotalFailures > c.Requests {
							fail("counts %+v: successes + failures > requests", c)
						}
						if d := cb.RemainingDelay(); d < 0 || d > 20*time.Microsecond {
							fail("RemainingDelay() = %v, Timeout 20µs", d)
						}
					}
				}()
			}
			wg.Wait()
			close(stop)
			<-stepped

			clk.Advance(time.Hour)
			var tks []breaker.Ticket
			if cb.State() != breaker.StateClosed {
				for range maxRequests {
					tk, err := cb.AllowTicket()
					if err != nil {
						t.Fatalf("after the run (state %v): %v; a probe slot leaked", cb.State(), err)
					}
					tks = append(tks, tk)
				}
			}
			for i := range tks {
				tks[i].Ignore()
			}
			final := cb.State()
			trips := edges[breaker.StateClosed][breaker.StateOpen].Load()
			for from := range 3 {
				var in, out int64
				for to := range 3 {
					out += edges[from][to].Load()
					in += edges[to][from].Load()
				}
				want := int64(0)
				if breaker.State(from) == final {
					want++
				}
				if breaker.State(from) == breaker.StateClosed {
					want--
				}
				if in-out != want {
					t.Errorf("%v: %d transitions in, %d out; final state %v", breaker.State(from), in, out, final)
				}
			}
			if trips < 5 {
				t.Errorf("%d trips: too few to exercise anything", trips)
			}
		})
	}
}
