package breaker_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groupexec/groupexec/breaker"
)

// TestConcurrentInvariants runs 1,000 goroutines through rapid trips and
// recoveries and checks, from inside the calls, the invariants that must hold
// exactly: at most MaxRequests probes in flight; TotalSuccesses +
// TotalFailures <= Requests; a valid state; and, at the end, one
// OnStateChange per transition (the reported transitions form a path from
// closed to the final state). Some Execute functions panic, and
// OnStateChange calls back into the breaker (it holds no lock), checking
// the invariants and taking a request it ignores: neither may leak a probe
// slot, which the end of the run checks.
func TestConcurrentInvariants(t *testing.T) {
	const (
		goroutines  = 1000
		maxRequests = 3
	)
	calls := 1000
	if testing.Short() {
		calls = 100
	}
	for _, interval := range []time.Duration{0, 300 * time.Microsecond} {
		t.Run(fmt.Sprintf("interval=%v", interval), func(t *testing.T) {
			clk := &fakeClock{}
			var edges [3][3]atomic.Int64
			var cb *breaker.CircuitBreaker
			var check func()
			cb = mustNew(t, breaker.Settings{
				MaxRequests: maxRequests,
				Interval:    interval,
				Timeout:     100 * time.Microsecond,
				Clock:       clk,
				OnStateChange: func(_ string, from, to breaker.State) {
					edges[from][to].Add(1)
					check()
					if tk, err := cb.AllowTicket(); err == nil {
						tk.Ignore()
					}
				},
			})

			var (
				inFlightProbes atomic.Int64 // probes between admission and outcome, seen from inside
				maxSeen        atomic.Int64
				violations     atomic.Int64
				admitted       atomic.Int64
				refused        [2]atomic.Int64
			)
			fail := func(format string, args ...any) {
				if violations.Add(1) <= 10 {
					t.Errorf(format, args...)
				}
			}
			check = func() {
				if s := cb.State(); s != breaker.StateClosed && s != breaker.StateOpen && s != breaker.StateHalfOpen {
					fail("invalid state %d", int(s))
				}
				if c := cb.Counts(); c.TotalSuccesses+c.TotalFailures > c.Requests {
					fail("counts %+v: successes + failures > requests", c)
				}
			}
			// Outcomes fail in bursts: 1 in 2 during the first 100µs of
			// every 1ms of fake time (one call is 1µs), 1 in 100
			// otherwise. Bursts trip the breaker (5 consecutive
			// failures), quiet times close it.
			outcome := func(r *rand.Rand) bool {
				if clk.Elapsed()%time.Millisecond < 100*time.Microsecond {
					return r.IntN(2) == 0
				}
				return r.IntN(100) != 0
			}
			// execute runs Execute with a function that succeeds if ok,
			// fails otherwise, or panics; it returns Execute's refusal, if
			// any. The panic must come up through Execute unchanged.
			execute := func(ok, panics bool) (err error) {
				ran := false
				defer func() {
					if v := recover(); (v != nil || ran && panics) && v != errPanic {
						fail("Execute: recovered %v, want the function's panic", v)
					}
				}()
				_, err = breaker.Execute(cb, func() (int, error) {
					ran = true
					switch {
					case panics:
						panic(errPanic)
					case !ok:
						return 0, errBoom
					}
					return 0, nil
				})
				if err == errBoom {
					err = nil
				}
				return err
			}
			probe := func(r *rand.Rand) {
				n := inFlightProbes.Add(1)
				for m := maxSeen.Load(); n > m && !maxSeen.CompareAndSwap(m, n); m = maxSeen.Load() {
				}
				if n > maxRequests {
					fail("%d probes in flight, MaxRequests %d", n, maxRequests)
				}
				if r.IntN(4) == 0 {
					runtime.Gosched() // widen the window
				}
				inFlightProbes.Add(-1)
			}

			start := make(chan struct{})
			var wg sync.WaitGroup
			for g := range goroutines {
				wg.Add(1)
				go func() {
					defer wg.Done()
					r := rand.New(rand.NewPCG(uint64(g), 42))
					<-start
					for i := range calls {
						clk.Advance(time.Microsecond)
						ok := outcome(r)
						var err error
						switch i % 4 {
						case 0: // Execute: cannot see whether it probes, only loads the breaker
							err = execute(ok, r.IntN(32) == 0)
						case 1: // Allow
							var done func(bool)
							if done, err = cb.Allow(); err == nil {
								done(ok)
							}
						default: // tickets, measured from inside
							var tk breaker.Ticket
							if tk, err = cb.AllowTicket(); err == nil {
								if tk.Probe() {
									probe(r)
								}
								switch {
								case r.IntN(10) == 0:
									tk.Ignore()
								case ok:
									tk.Success()
								default:
									tk.Failure()
								}
							}
						}
						switch err {
						case nil:
							admitted.Add(1)
						case breaker.ErrOpenState:
							refused[0].Add(1)
						case breaker.ErrTooManyRequests:
							// Back off, as a caller would: spinning
							// here starves the probes of CPU.
							refused[1].Add(1)
							runtime.Gosched()
						default:
							fail("unexpected error %v", err)
						}
						if i%16 == 0 {
							check()
						}
					}
				}()
			}
			close(start)
			wg.Wait()
			check()

			// Every probe slot came back: once quiet, a half-open breaker
			// admits MaxRequests probes.
			clk.Advance(time.Second)
			var tks []breaker.Ticket
			for range maxRequests {
				tk, err := cb.AllowTicket()
				if err != nil {
					t.Fatalf("after the run (state %v): %v; a probe slot leaked", cb.State(), err)
				}
				tks = append(tks, tk)
			}
			for i := range tks {
				tks[i].Ignore()
			}

			// Every transition reported once: in and out degrees balance
			// along a path from closed to the final state.
			valid := map[[2]breaker.State]bool{
				{breaker.StateClosed, breaker.StateOpen}:     true,
				{breaker.StateOpen, breaker.StateHalfOpen}:   true,
				{breaker.StateHalfOpen, breaker.StateClosed}: true,
				{breaker.StateHalfOpen, breaker.StateOpen}:   true,
			}
			final := cb.State()
			var total int64
			for from := range 3 {
				var out, in int64
				for to := range 3 {
					n := edges[from][to].Load()
					total += n
					if n > 0 && !valid[[2]breaker.State{breaker.State(from), breaker.State(to)}] {
						t.Errorf("reported %v->%v %d times: not a transition", breaker.State(from), breaker.State(to), n)
					}
					out += n
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
			t.Logf("%d transitions (%d trips, %d recoveries); admitted %d, refused open %d, refused half-open %d; max probes in flight seen %d",
				total, edges[breaker.StateClosed][breaker.StateOpen].Load(), edges[breaker.StateHalfOpen][breaker.StateClosed].Load(),
				admitted.Load(), refused[0].Load(), refused[1].Load(), maxSeen.Load())
			if edges[breaker.StateClosed][breaker.StateOpen].Load() < 10 || edges[breaker.StateHalfOpen][breaker.StateClosed].Load() < 10 {
				t.Errorf("too few trips or recoveries to exercise anything")
			}
			if maxSeen.Load() < 2 {
				t.Errorf("never saw 2 probes in flight: the bound was not exercised")
			}
		})
	}
}

// errPanic is what the race tests' panicking functions panic with.
var errPanic = errors.New("panicked")

// TestOneCallbackPerTransitionUnderContention releases 1,000 goroutines at
// once at each transition and checks it is made, and reported, exactly once.
func TestOneCallbackPerTransitionUnderContention(t *testing.T) {
	const n = 1000
	type setup struct {
		cb    *breaker.CircuitBreaker
		clk   *fakeClock
		edges *[3][3]atomic.Int64
	}
	newSetup := func(maxRequests uint32) setup {
		s := setup{clk: &fakeClock{}, edges: new([3][3]atomic.Int64)}
		s.cb = mustNew(t, breaker.Settings{MaxRequests: maxRequests, Timeout: time.Second, Clock: s.clk,
			OnStateChange: func(_ string, from, to breaker.State) { s.edges[from][to].Add(1) }})
		return s
	}
	// all runs f in n goroutines released together.
	all := func(f func(i int)) {
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				f(i)
			}()
		}
		close(start)
		wg.Wait()
	}
	admitN := func(t *testing.T, cb *breaker.CircuitBreaker) []breaker.Ticket {
		tks := make([]breaker.Ticket, n)
		for i := range tks {
			var err error
			if tks[i], err = cb.AllowTicket(); err != nil {
				t.Fatal(err)
			}
		}
		return tks
	}
	want := func(t *testing.T, s setup, from, to breaker.State) {
		t.Helper()
		for f := range 3 {
			for g := range 3 {
				w := int64(0)
				if breaker.State(f) == from && breaker.State(g) == to {
					w = 1
				}
				if got := s.edges[f][g].Swap(0); got != w {
					t.Errorf("%v->%v reported %d times, want %d", breaker.State(f), breaker.State(g), got, w)
				}
			}
		}
		wantState(t, s.cb, to)
	}

	t.Run("closed->open", func(t *testing.T) {
		s := newSetup(1)
		tks := admitN(t, s.cb)
		all(func(i int) { tks[i].Failure() })
		want(t, s, breaker.StateClosed, breaker.StateOpen)
	})
	t.Run("open->half-open", func(t *testing.T) {
		s := newSetup(n)
		trip(t, s.cb)
		s.edges[breaker.StateClosed][breaker.StateOpen].Store(0)
		s.clk.Advance(time.Second)
		var admitted atomic.Int64
		tks := make([]breaker.Ticket, n)
		all(func(i int) {
			var err error
			if tks[i], err = s.cb.AllowTicket(); err == nil {
				admitted.Add(1)
			}
		})
		want(t, s, breaker.StateOpen, breaker.StateHalfOpen)
		if admitted.Load() != n {
			t.Errorf("%d of %d probes admitted with MaxRequests %d", admitted.Load(), n, n)
		}
		for i := range tks {
			tks[i].Ignore()
		}
	})
	t.Run("half-open->open", func(t *testing.T) {
		s := newSetup(n)
		trip(t, s.cb)
		s.clk.Advance(time.Second)
		tks := admitN(t, s.cb)
		s.edges[breaker.StateClosed][breaker.StateOpen].Store(0)
		s.edges[breaker.StateOpen][breaker.StateHalfOpen].Store(0)
		all(func(i int) { tks[i].Failure() })
		want(t, s, breaker.StateHalfOpen, breaker.StateOpen)
	})
	t.Run("half-open->closed", func(t *testing.T) {
		s := newSetup(n)
		trip(t, s.cb)
		s.clk.Advance(time.Second)
		tks := admitN(t, s.cb)
		s.edges[breaker.StateClosed][breaker.StateOpen].Store(0)
		s.edges[breaker.StateOpen][breaker.StateHalfOpen].Store(0)
		all(func(i int) { tks[i].Success() })
		want(t, s, breaker.StateHalfOpen, breaker.StateClosed)
	})
	t.Run("open->half-open, MaxRequests 1", func(t *testing.T) {
		s := newSetup(1)
		trip(t, s.cb)
		s.edges[breaker.StateClosed][breaker.StateOpen].Store(0)
		s.clk.Advance(time.Second)
		var admitted, tooMany atomic.Int64
		var winner breaker.Ticket
		var mu sync.Mutex
		all(func(int) {
			tk, err := s.cb.AllowTicket()
			switch err {
			case nil:
				admitted.Add(1)
				mu.Lock()
				winner = tk
				mu.Unlock()
			case breaker.ErrTooManyRequests:
				tooMany.Add(1)
			default:
				t.Errorf("AllowTicket: %v", err)
			}
		})
		want(t, s, breaker.StateOpen, breaker.StateHalfOpen)
		if admitted.Load() != 1 || tooMany.Load() != n-1 {
			t.Errorf("admitted %d, ErrTooManyRequests %d; want 1 and %d", admitted.Load(), tooMany.Load(), n-1)
		}
		winner.Success()
		want(t, s, breaker.StateHalfOpen, breaker.StateClosed)
	})
}
