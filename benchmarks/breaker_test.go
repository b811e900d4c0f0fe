package benchmarks

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	eapache "github.com/eapache/go-resiliency/breaker"
	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/circuitbreaker"
	"github.com/sony/gobreaker/v2"

	"github.com/groupexec/groupexec/breaker"
)

// Circuit breakers in the closed state, where a breaker spends nearly all
// its life. One op is one request let through, a trivial function run (for
// the two-step forms, nothing run) and its success recorded. Every breaker
// is configured alike: trip on the 5th consecutive failure, one minute open,
// no interval clearing. Serial is one goroutine; parallel is b.RunParallel
// (GOMAXPROCS goroutines) on one shared breaker.

var (
	okFn  = func() (struct{}, error) { return struct{}{}, nil } // built once: no closure per op
	okRun = func() error { return nil }
)

// paddedWord is the reference op's word, alone on its cache line.
type paddedWord struct {
	_ [64]byte
	n atomic.Uint64
	_ [56]byte
}

func newOurBreaker(tb testing.TB) *breaker.CircuitBreaker {
	cb, err := breaker.New(breaker.Settings{Name: "bench", Timeout: time.Minute})
	if err != nil {
		tb.Fatal(err)
	}
	return cb
}

func newGobreaker() *gobreaker.CircuitBreaker[struct{}] {
	return gobreaker.NewCircuitBreaker[struct{}](gobreaker.Settings{
		Name:        "bench",
		Timeout:     time.Minute,
		ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= 5 },
	})
}

func newFailsafe() circuitbreaker.CircuitBreaker[struct{}] {
	return circuitbreaker.NewBuilder[struct{}]().WithFailureThreshold(5).WithDelay(time.Minute).Build()
}

// breakerPeers are the measured ops. Each newOp builds a fresh breaker and
// returns one request on it; every peer pays the same indirect call.
var breakerPeers = []opPeer{
	{"atomic-load-add", func(testing.TB) func() error {
		// The floor: one atomic load and one atomic add, what the
		// lightest possible breaker would do.
		w := new(paddedWord)
		return func() error {
			if w.n.Load() != ^uint64(0) {
				w.n.Add(1)
			}
			return nil
		}
	}},
	{"ours-allow", func(tb testing.TB) func() error {
		cb := newOurBreaker(tb)
		return func() error {
			done, err := cb.Allow()
			if err == nil {
				done(true)
			}
			return err
		}
	}},
	{"ours-ticket", func(tb testing.TB) func() error {
		cb := newOurBreaker(tb)
		return func() error {
			t, err := cb.AllowTicket()
			t.Success()
			return err
		}
	}},
	{"ours-execute", func(tb testing.TB) func() error {
		cb := newOurBreaker(tb)
		return func() error {
			_, err := breaker.Execute(cb, okFn)
			return err
		}
	}},
	{"gobreaker-execute", func(testing.TB) func() error {
		cb := newGobreaker()
		return func() error {
			_, err := cb.Execute(okFn)
			return err
		}
	}},
	{"failsafe-permit", func(testing.TB) func() error {
		// failsafe-go's cheapest correct path: the policy used directly.
		cb := newFailsafe()
		return func() error {
			if !cb.TryAcquirePermit() {
				return circuitbreaker.ErrOpen
			}
			cb.RecordSuccess()
			return nil
		}
	}},
	{"failsafe-get", func(testing.TB) func() error {
		ex := failsafe.With[struct{}](newFailsafe())
		return func() error {
			_, err := ex.Get(okFn)
			return err
		}
	}},
	{"failsafe-run", func(testing.TB) func() error {
		ex := failsafe.With[struct{}](newFailsafe())
		return func() error { return ex.Run(okRun) }
	}},
	{"eapache-run", func(testing.TB) func() error {
		cb := eapache.New(5, 1, time.Minute)
		return func() error { return cb.Run(okRun) }
	}},
}

func BenchmarkBreakerSerial(b *testing.B)   { benchOps(b, breakerPeers, false) }
func BenchmarkBreakerParallel(b *testing.B) { benchOps(b, breakerPeers, true) }

// TestBreakerPeers checks that every benchmark op succeeds on a fresh
// breaker, and that every peer, configured as in the benchmarks, refuses
// requests once 5 consecutive failures have tripped it: the benchmarks
// compare breakers that work.
func TestBreakerPeers(t *testing.T) {
	for _, p := range breakerPeers {
		op := p.newOp(t)
		for range 1000 {
			if err := op(); err != nil {
				t.Fatalf("%s: %v", p.name, err)
			}
		}
	}

	errBoom := errors.New("boom")
	fail := func() (struct{}, error) { return struct{}{}, errBoom }
	failRun := func() error { return errBoom }

	t.Run("ours", func(t *testing.T) {
		cb := newOurBreaker(t)
		for range 5 {
			if _, err := breaker.Execute(cb, fail); !errors.Is(err, errBoom) {
				t.Fatalf("closed: got %v", err)
			}
		}
		if _, err := breaker.Execute(cb, okFn); !errors.Is(err, breaker.ErrOpenState) {
			t.Fatalf("after 5 failures: got %v, want ErrOpenState", err)
		}
	})
	t.Run("gobreaker", func(t *testing.T) {
		cb := newGobreaker()
		for range 5 {
			_, _ = cb.Execute(fail)
		}
		if _, err := cb.Execute(okFn); !errors.Is(err, gobreaker.ErrOpenState) {
			t.Fatalf("after 5 failures: got %v, want ErrOpenState", err)
		}
	})
	t.Run("failsafe", func(t *testing.T) {
		cb := newFailsafe()
		ex := failsafe.With[struct{}](cb)
		for range 5 {
			_ = ex.Run(failRun)
		}
		if cb.TryAcquirePermit() {
			t.Fatal("after 5 failures: permit granted")
		}
		if err := ex.Run(okRun); !errors.Is(err, circuitbreaker.ErrOpen) {
			t.Fatalf("after 5 failures: got %v, want circuitbreaker.ErrOpen", err)
		}
	})
	t.Run("eapache", func(t *testing.T) {
		// Tripping starts a goroutine that sleeps for the timeout; keep it
		// short so that it ends before goleak looks.
		cb := eapache.New(5, 1, 50*time.Millisecond)
		for range 5 {
			_ = cb.Run(failRun)
		}
		if err := cb.Run(okRun); !errors.Is(err, eapache.ErrBreakerOpen) {
			t.Fatalf("after 5 failures: got %v, want ErrBreakerOpen", err)
		}
	})
}
