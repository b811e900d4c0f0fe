package breaker_test

// A port of the test suite of sony/gobreaker v2 (github.com/sony/gobreaker,
// v2/gobreaker_test.go and v2/twostep_gobreaker_test.go at commit fed8e9eb),
// Copyright 2015 Sony Corporation, MIT License. Each case keeps its upstream
// name after "TestGobreaker" and its sequence of requests and expectations;
// what changed:
//
//   - Time comes from the breaker's injected clock: upstream moves the
//     breaker's private start and expiry back (pseudoSleep) or sleeps; here
//     the fake clock is advanced by the same amounts, and a request kept in
//     flight by a sleep is kept there by a channel instead.
//   - Upstream reads private fields (maxRequests, interval, timeout, expiry,
//     counts.clear()); here each is checked by the behaviour it has, or set
//     up through Settings.
//   - Where breaker's doc says otherwise on purpose, the expectation follows
//     breaker's doc, and a comment at the case says so. The differences
//     that recur: the default ReadyToTrip trips on the 5th consecutive
//     failure (gobreaker's on the 6th); State and Counts only read, so an
//     open breaker whose Timeout has passed reports open until a request
//     half-opens it, and ended Interval counts show until a request clears
//     them; half-open bounds the probes in flight, not the requests of the
//     period; negative durations are refused by New, not defaulted.
//   - breaker has no IsExcluded and no Counts.TotalExclusions. Its way to
//     finish a request without an outcome is Ticket.Ignore, which also takes
//     the request back off Counts.Requests; the excluded requests here
//     go through AllowTicket and Ignore, and the expected Requests leave
//     them out.
//
// Left out: TestRollingWindowCircuitBreaker, its InParallel twin and the
// rolling-window breaker of TestNewCircuitBreaker (breaker has no
// BucketPeriod: its counts are one fixed window, cleared every Interval);
// v2/distributed_gobreaker_test.go and v2/redis (breaker has no shared
// state store); v2/counter_test.go (it tests gobreaker's private counter
// methods, which breaker does not have; its Counts arithmetic is checked
// here through requests).

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groupexec/groupexec/breaker"
)

var errGbFailed = errors.New("failed")

// gbStateChange is the last OnStateChange call.
type gbStateChange struct {
	name     string
	from, to breaker.State
}

type gbLastChange struct {
	mu   sync.Mutex
	last gbStateChange
}

func (l *gbLastChange) record(name string, from, to breaker.State) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.last = gbStateChange{name, from, to}
}

func (l *gbLastChange) want(t *testing.T, want gbStateChange) {
	t.Helper()
	l.mu.Lock()
	got := l.last
	l.mu.Unlock()
	if got != want {
		t.Fatalf("last state change %v, want %v", got, want)
	}
}

func gbSucceed(cb *breaker.CircuitBreaker) error {
	_, err := breaker.Execute(cb, func() (bool, error) { return true, nil })
	return err
}

// gbFail returns nil when the request ran and failed, and the breaker's
// refusal otherwise.
func gbFail(cb *breaker.CircuitBreaker) error {
	_, err := breaker.Execute(cb, func() (bool, error) { return false, errGbFailed })
	if errors.Is(err, errGbFailed) {
		return nil
	}
	return err
}

// gbExclude makes a request whose error says nothing about the dependency.
// Upstream passes it to Execute, whose IsExcluded recognises it; breaker
// has no IsExcluded, so the caller judges the error and finishes the
// request with Ignore.
func gbExclude(cb *breaker.CircuitBreaker) error {
	tk, err := cb.AllowTicket()
	if err != nil {
		return err
	}
	tk.Ignore() // the request's error was one upstream's IsExcluded recognises
	return nil
}

// gbSucceedLater starts a request through Execute in another goroutine and
// returns once its function runs (or the request was refused). finish lets
// the function return success and returns Execute's error. Upstream's
// request sleeps instead.
func gbSucceedLater(cb *breaker.CircuitBreaker) (finish func() error) {
	running, release, result := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		_, err := breaker.Execute(cb, func() (bool, error) {
			close(running)
			<-release
			return true, nil
		})
		result <- err
	}()
	select {
	case <-running:
		return func() error { close(release); return <-result }
	case err := <-result:
		return func() error { return err }
	}
}

// gbCustom is upstream's newCustom: its Settings, on a fake clock.
func gbCustom(clk *fakeClock, sc *gbLastChange) breaker.Settings {
	s := breaker.Settings{
		Name:        "cb",
		MaxRequests: 3,
		Interval:    30 * time.Second,
		Timeout:     90 * time.Second,
		ReadyToTrip: func(c breaker.Counts) bool {
			// Upstream divides by Requests - TotalExclusions; breaker's
			// Requests already leave ignored requests out.
			ratio := float64(c.TotalFailures) / float64(c.Requests)
			return c.Requests >= 3 && ratio >= 0.6
		},
		Clock: clk,
	}
	if sc != nil {
		s.OnStateChange = sc.record
	}
	return s
}

func TestGobreakerStateConstants(t *testing.T) {
	// breaker declares its states closed, open, half-open: the numbers are
	// its own (gobreaker's are closed 0, half-open 1, open 2).
	if breaker.StateClosed != 0 || breaker.StateOpen != 1 || breaker.StateHalfOpen != 2 {
		t.Fatalf("states closed %d, open %d, half-open %d; want 0, 1, 2",
			breaker.StateClosed, breaker.StateOpen, breaker.StateHalfOpen)
	}
	for s, want := range map[breaker.State]string{
		breaker.StateClosed:   "closed",
		breaker.StateHalfOpen: "half-open",
		breaker.StateOpen:     "open",
		breaker.State(100):    "State(100)", // gobreaker: "unknown state: 100"
	} {
		if got := s.String(); got != want {
			t.Errorf("State(%d).String() = %q, want %q", int32(s), got, want)
		}
	}
}

// gbWantEffective checks, by behaviour, the MaxRequests, Interval and
// Timeout that a breaker built from s uses (upstream reads the private
// fields). s.Clock must be clk, at 0, and s.ReadyToTrip must trip on
// failures alone once there are enough of them.
func gbWantEffective(t *testing.T, s breaker.Settings, clk *fakeClock, maxRequests int, interval, timeout time.Duration) {
	t.Helper()
	clk.Set(0)
	cb := mustNew(t, s)

	// Interval: counts are kept until it ends, then cleared by a request.
	wantErr(t, gbSucceed(cb), nil)
	if interval == 0 {
		clk.Advance(100 * 365 * 24 * time.Hour)
		wantErr(t, gbSucceed(cb), nil)
		wantCounts(t, cb, breaker.Counts{Requests: 2, TotalSuccesses: 2, ConsecutiveSuccesses: 2})
	} else {
		clk.Set(interval - time.Nanosecond)
		wantErr(t, gbSucceed(cb), nil)
		wantCounts(t, cb, breaker.Counts{Requests: 2, TotalSuccesses: 2, ConsecutiveSuccesses: 2})
		clk.Set(interval)
		wantErr(t, gbSucceed(cb), nil)
		wantCounts(t, cb, breaker.Counts{Requests: 1, TotalSuccesses: 1, ConsecutiveSuccesses: 1})
	}

	// Timeout: refused until it has passed since the trip.
	for i := 0; cb.State() != breaker.StateOpen; i++ {
		if i == 100 {
			t.Fatal("100 failures did not trip the breaker")
		}
		wantErr(t, gbFail(cb), nil)
	}
	clk.Advance(timeout - time.Nanosecond)
	wantErr(t, gbSucceed(cb), breaker.ErrOpenState)
	clk.Advance(time.Nanosecond)

	// MaxRequests: that many probes at once, no more.
	var probes []breaker.Ticket
	for {
		tk, err := cb.AllowTicket()
		if err != nil {
			wantErr(t, err, breaker.ErrTooManyRequests)
			break
		}
		probes = append(probes, tk)
		if len(probes) > maxRequests {
			break
		}
	}
	if len(probes) != maxRequests {
		t.Fatalf("%d probes let through at once, want MaxRequests %d", len(probes), maxRequests)
	}
	for i := range probes {
		probes[i].Ignore()
	}
}

func TestGobreakerNewCircuitBreaker(t *testing.T) {
	clk := &fakeClock{}
	defaultCB := mustNew(t, breaker.Settings{Clock: clk})
	if got := defaultCB.Name(); got != "" {
		t.Fatalf("Name() = %q, want empty", got)
	}
	wantState(t, defaultCB, breaker.StateClosed)
	wantCounts(t, defaultCB, breaker.Counts{})
	gbWantEffective(t, breaker.Settings{Clock: clk}, clk, 1, 0, 60*time.Second)

	var sc gbLastChange
	customCB := mustNew(t, gbCustom(clk, &sc))
	if got := customCB.Name(); got != "cb" {
		t.Fatalf("Name() = %q, want cb", got)
	}
	wantState(t, customCB, breaker.StateClosed)
	wantCounts(t, customCB, breaker.Counts{})
	gbWantEffective(t, gbCustom(clk, &sc), clk, 3, 30*time.Second, 90*time.Second)

	// Upstream's newNegativeDurationCB gets the defaults (Interval 0,
	// Timeout 60s). breaker refuses negative durations on purpose (its doc:
	// "Negative is invalid"), naming the first invalid field.
	for _, tc := range []struct {
		s     breaker.Settings
		field string
	}{
		{breaker.Settings{Name: "ncb", Interval: -30 * time.Second, Timeout: -90 * time.Second}, "Interval"},
		{breaker.Settings{Name: "ncb", Timeout: -90 * time.Second}, "Timeout"},
	} {
		cb, err := breaker.New(tc.s)
		var se *breaker.SettingsError
		if cb != nil || !errors.Is(err, breaker.ErrInvalidSettings) || !errors.As(err, &se) || se.Field != tc.field {
			t.Fatalf("New(%+v) = %v, %v; want nil and a SettingsError for %s", tc.s, cb, err, tc.field)
		}
	}
}

func TestGobreakerDefaultCircuitBreaker(t *testing.T) {
	clk := &fakeClock{}
	var rec recorder
	defaultCB := mustNew(t, breaker.Settings{Clock: clk, OnStateChange: rec.record})
	if got := defaultCB.Name(); got != "" {
		t.Fatalf("Name() = %q, want empty", got)
	}

	// Upstream makes 5 failures here and expects closed: gobreaker's default
	// trips on the 6th consecutive failure, breaker's (documented) on the
	// 5th. Every run of failures below is one shorter than upstream's.
	for range 4 {
		wantErr(t, gbFail(defaultCB), nil)
	}
	wantState(t, defaultCB, breaker.StateClosed)
	wantCounts(t, defaultCB, breaker.Counts{Requests: 4, TotalFailures: 4, ConsecutiveFailures: 4})

	wantErr(t, gbSucceed(defaultCB), nil)
	wantState(t, defaultCB, breaker.StateClosed)
	wantCounts(t, defaultCB, breaker.Counts{Requests: 5, TotalSuccesses: 1, TotalFailures: 4, ConsecutiveSuccesses: 1})

	wantErr(t, gbFail(defaultCB), nil)
	wantState(t, defaultCB, breaker.StateClosed)
	wantCounts(t, defaultCB, breaker.Counts{Requests: 6, TotalSuccesses: 1, TotalFailures: 5, ConsecutiveFailures: 1})

	// StateClosed to StateOpen
	for range 4 {
		wantErr(t, gbFail(defaultCB), nil) // 5 consecutive failures
	}
	wantState(t, defaultCB, breaker.StateOpen)
	wantCounts(t, defaultCB, breaker.Counts{})

	wantErr(t, gbSucceed(defaultCB), breaker.ErrOpenState)
	wantErr(t, gbFail(defaultCB), breaker.ErrOpenState)
	wantCounts(t, defaultCB, breaker.Counts{})

	clk.Advance(breaker.DefaultTimeout - time.Millisecond)
	wantState(t, defaultCB, breaker.StateOpen)
	wantErr(t, gbSucceed(defaultCB), breaker.ErrOpenState)

	// StateOpen to StateHalfOpen. Upstream's State() moves the breaker;
	// breaker's State only reads (its doc), so it is still open, and the
	// next request half-opens it and is its probe.
	clk.Advance(time.Second) // over Timeout
	wantState(t, defaultCB, breaker.StateOpen)

	// StateHalfOpen to StateOpen
	wantErr(t, gbFail(defaultCB), nil)
	wantState(t, defaultCB, breaker.StateOpen)
	wantCounts(t, defaultCB, breaker.Counts{})

	// StateOpen to StateHalfOpen
	clk.Advance(breaker.DefaultTimeout + time.Nanosecond)
	wantState(t, defaultCB, breaker.StateOpen) // as above: only reads

	// StateHalfOpen to StateClosed
	wantErr(t, gbSucceed(defaultCB), nil)
	wantState(t, defaultCB, breaker.StateClosed)
	wantCounts(t, defaultCB, breaker.Counts{})

	want := []string{"closed->open", "open->half-open", "half-open->open", "open->half-open", "half-open->closed"}
	if got := rec.take(); !equal(got, want) {
		t.Fatalf("transitions %v, want %v", got, want)
	}
}

func TestGobreakerCustomCircuitBreaker(t *testing.T) {
	clk := &fakeClock{}
	var sc gbLastChange
	customCB := mustNew(t, gbCustom(clk, &sc))
	if got := customCB.Name(); got != "cb" {
		t.Fatalf("Name() = %q, want cb", got)
	}

	for range 5 {
		wantErr(t, gbSucceed(customCB), nil)
		wantErr(t, gbFail(customCB), nil)
		wantErr(t, gbExclude(customCB), nil)
	}
	wantState(t, customCB, breaker.StateClosed)
	// Upstream: Requests 15, TotalExclusions 5 (see the top of the file).
	wantCounts(t, customCB, breaker.Counts{Requests: 10, TotalSuccesses: 5, TotalFailures: 5, ConsecutiveFailures: 1})

	clk.Advance(30*time.Second - time.Millisecond)
	wantErr(t, gbSucceed(customCB), nil)
	wantState(t, customCB, breaker.StateClosed)
	wantCounts(t, customCB, breaker.Counts{Requests: 11, TotalSuccesses: 6, TotalFailures: 5, ConsecutiveSuccesses: 1})

	clk.Advance(time.Second) // over Interval
	wantErr(t, gbFail(customCB), nil)
	wantState(t, customCB, breaker.StateClosed)
	wantCounts(t, customCB, breaker.Counts{Requests: 1, TotalFailures: 1, ConsecutiveFailures: 1})

	// StateClosed to StateOpen
	wantErr(t, gbSucceed(customCB), nil)
	wantErr(t, gbFail(customCB), nil) // failure ratio: 2/3 >= 0.6
	wantState(t, customCB, breaker.StateOpen)
	wantCounts(t, customCB, breaker.Counts{})
	sc.want(t, gbStateChange{"cb", breaker.StateClosed, breaker.StateOpen})

	// StateOpen to StateHalfOpen. breaker's State only reads: still open,
	// with no change reported, until the next request.
	clk.Advance(90*time.Second + time.Nanosecond)
	wantState(t, customCB, breaker.StateOpen)
	sc.want(t, gbStateChange{"cb", breaker.StateClosed, breaker.StateOpen})

	// Excluded requests are neutral in half-open: with Ignore each gives
	// its probe slot back, so more of them than MaxRequests pass one after
	// the other. (The first one half-opens the breaker.)
	for range 4 {
		wantErr(t, gbExclude(customCB), nil)
	}
	wantState(t, customCB, breaker.StateHalfOpen)
	sc.want(t, gbStateChange{"cb", breaker.StateOpen, breaker.StateHalfOpen})
	wantCounts(t, customCB, breaker.Counts{})

	// In half-open, the first real failure reopens the breaker.
	wantErr(t, gbFail(customCB), nil)
	wantState(t, customCB, breaker.StateOpen)
	wantCounts(t, customCB, breaker.Counts{})
	sc.want(t, gbStateChange{"cb", breaker.StateHalfOpen, breaker.StateOpen})

	// Open to half-open after the timeout, by the next request.
	clk.Advance(90*time.Second + time.Nanosecond)
	wantState(t, customCB, breaker.StateOpen)

	// Successes are counted but do not close the breaker until there are
	// MaxRequests of them.
	wantErr(t, gbSucceed(customCB), nil)
	wantErr(t, gbSucceed(customCB), nil)
	wantState(t, customCB, breaker.StateHalfOpen)
	wantCounts(t, customCB, breaker.Counts{Requests: 2, TotalSuccesses: 2, ConsecutiveSuccesses: 2})

	// StateHalfOpen to StateClosed
	finish := gbSucceedLater(customCB) // in flight
	wantCounts(t, customCB, breaker.Counts{Requests: 3, TotalSuccesses: 2, ConsecutiveSuccesses: 2})
	// Upstream refuses the next request here: gobreaker bounds the requests
	// of a half-open period by MaxRequests. breaker bounds those in flight
	// (its doc), and one is: two more may start, then it refuses.
	t1, err := customCB.AllowTicket()
	wantErr(t, err, nil)
	t2, err := customCB.AllowTicket()
	wantErr(t, err, nil)
	wantErr(t, gbSucceed(customCB), breaker.ErrTooManyRequests) // over MaxRequests in flight
	t1.Ignore()
	t2.Ignore()
	// So the request upstream refuses is let through here, and its success
	// is the 3rd consecutive one: it closes the breaker...
	wantErr(t, gbSucceed(customCB), nil)
	wantState(t, customCB, breaker.StateClosed)
	wantCounts(t, customCB, breaker.Counts{})
	sc.want(t, gbStateChange{"cb", breaker.StateHalfOpen, breaker.StateClosed})
	// ...and the success still in flight, from the half-open period that
	// ended, does not count in the closed one.
	wantErr(t, finish(), nil)
	wantState(t, customCB, breaker.StateClosed)
	wantCounts(t, customCB, breaker.Counts{})

	// Upstream checks that the closed breaker has an expiry: its Interval
	// runs from the close.
	clk.Advance(30*time.Second - time.Nanosecond)
	wantErr(t, gbSucceed(customCB), nil)
	wantCounts(t, customCB, breaker.Counts{Requests: 1, TotalSuccesses: 1, ConsecutiveSuccesses: 1})
	clk.Advance(time.Nanosecond)
	wantErr(t, gbFail(customCB), nil)
	wantCounts(t, customCB, breaker.Counts{Requests: 1, TotalFailures: 1, ConsecutiveFailures: 1})
}

func TestGobreakerTwoStepCircuitBreaker(t *testing.T) {
	succeed2Step := func(cb *breaker.CircuitBreaker) error {
		done, err := cb.Allow()
		if err != nil {
			return err
		}
		done(true)
		return nil
	}
	fail2Step := func(cb *breaker.CircuitBreaker) error {
		done, err := cb.Allow()
		if err != nil {
			return err
		}
		done(false)
		return nil
	}
	// Allow's done has no "excluded": a request that records nothing is a
	// Ticket finished with Ignore.
	exclude2Step := func(cb *breaker.CircuitBreaker) error {
		tk, err := cb.AllowTicket()
		if err != nil {
			return err
		}
		tk.Ignore()
		return nil
	}
	// exclude2StepLater lets a request through and returns finish, which
	// ignores it in another goroutine and waits for that; upstream's
	// goroutine sleeps 100ms first.
	exclude2StepLater := func(cb *breaker.CircuitBreaker) (finish func(), err error) {
		tk, err := cb.AllowTicket()
		if err != nil {
			return nil, err
		}
		return func() {
			finished := make(chan struct{})
			go func() {
				tk.Ignore()
				close(finished)
			}()
			<-finished
		}, nil
	}

	clk := &fakeClock{}
	var rec recorder
	tscb := mustNew(t, breaker.Settings{Name: "tscb", MaxRequests: 2, Clock: clk, OnStateChange: rec.record})
	if got := tscb.Name(); got != "tscb" {
		t.Fatalf("Name() = %q, want tscb", got)
	}

	// 4 failures where upstream has 5: breaker's default trips on the 5th.
	for range 4 {
		wantErr(t, fail2Step(tscb), nil)
	}
	wantState(t, tscb, breaker.StateClosed)
	wantCounts(t, tscb, breaker.Counts{Requests: 4, TotalFailures: 4, ConsecutiveFailures: 4})

	wantErr(t, succeed2Step(tscb), nil)
	wantState(t, tscb, breaker.StateClosed)
	wantCounts(t, tscb, breaker.Counts{Requests: 5, TotalSuccesses: 1, TotalFailures: 4, ConsecutiveSuccesses: 1})

	wantErr(t, fail2Step(tscb), nil)
	wantState(t, tscb, breaker.StateClosed)
	wantCounts(t, tscb, breaker.Counts{Requests: 6, TotalSuccesses: 1, TotalFailures: 5, ConsecutiveFailures: 1})

	// StateClosed to StateOpen
	for range 4 {
		wantErr(t, fail2Step(tscb), nil) // 5 consecutive failures
	}
	wantState(t, tscb, breaker.StateOpen)
	wantCounts(t, tscb, breaker.Counts{})

	wantErr(t, succeed2Step(tscb), breaker.ErrOpenState)
	wantErr(t, fail2Step(tscb), breaker.ErrOpenState)
	wantErr(t, exclude2Step(tscb), breaker.ErrOpenState)
	wantCounts(t, tscb, breaker.Counts{})

	clk.Advance(breaker.DefaultTimeout - time.Millisecond)
	wantState(t, tscb, breaker.StateOpen)

	// StateOpen to StateHalfOpen: by the next request (State only reads).
	clk.Advance(time.Second) // over timeout
	wantState(t, tscb, breaker.StateOpen)

	// In half-open, while MaxRequests requests are in flight, others are
	// refused with ErrTooManyRequests; once the requests in flight end
	// ignored, requests are let through again.
	finish1, err := exclude2StepLater(tscb)
	wantErr(t, err, nil)
	wantState(t, tscb, breaker.StateHalfOpen)
	finish2, err := exclude2StepLater(tscb)
	wantErr(t, err, nil)
	wantErr(t, succeed2Step(tscb), breaker.ErrTooManyRequests)
	wantErr(t, fail2Step(tscb), breaker.ErrTooManyRequests)
	finish1()
	finish2()
	wantErr(t, succeed2Step(tscb), nil)

	// StateHalfOpen to StateOpen
	wantErr(t, fail2Step(tscb), nil)
	wantState(t, tscb, breaker.StateOpen)
	wantCounts(t, tscb, breaker.Counts{})

	// StateOpen to StateHalfOpen
	clk.Advance(breaker.DefaultTimeout + time.Nanosecond)
	wantState(t, tscb, breaker.StateOpen) // only reads

	// StateHalfOpen to StateClosed
	wantErr(t, succeed2Step(tscb), nil)
	wantState(t, tscb, breaker.StateHalfOpen)
	wantErr(t, succeed2Step(tscb), nil)
	wantState(t, tscb, breaker.StateClosed)
	wantCounts(t, tscb, breaker.Counts{})

	want := []string{"closed->open", "open->half-open", "half-open->open", "open->half-open", "half-open->closed"}
	if got := rec.take(); !equal(got, want) {
		t.Fatalf("transitions %v, want %v", got, want)
	}
}

func TestGobreakerPanicInRequest(t *testing.T) {
	defaultCB := mustNew(t, breaker.Settings{Clock: &fakeClock{}})
	func() {
		defer func() {
			if r := recover(); r != "oops" {
				t.Fatalf("recovered %v, want the request's panic oops", r)
			}
		}()
		_, _ = breaker.Execute(defaultCB, func() (bool, error) { panic("oops") })
		t.Fatal("Execute returned; want the request's panic")
	}()
	wantCounts(t, defaultCB, breaker.Counts{Requests: 1, TotalFailures: 1, ConsecutiveFailures: 1})
}

func TestGobreakerGeneration(t *testing.T) {
	clk := &fakeClock{}
	customCB := mustNew(t, gbCustom(clk, nil))
	clk.Advance(29 * time.Second)
	wantErr(t, gbSucceed(customCB), nil)
	finish := gbSucceedLater(customCB)
	wantCounts(t, customCB, breaker.Counts{Requests: 2, TotalSuccesses: 1, ConsecutiveSuccesses: 1})

	clk.Advance(time.Second) // over Interval
	wantState(t, customCB, breaker.StateClosed)
	// Upstream's Counts clears the ended period's counts; breaker's only
	// reads (its doc): they show until a request starts the next period.
	wantCounts(t, customCB, breaker.Counts{Requests: 2, TotalSuccesses: 1, ConsecutiveSuccesses: 1})
	// A request that records nothing starts it without counting itself.
	wantErr(t, gbExclude(customCB), nil)
	wantCounts(t, customCB, breaker.Counts{})

	// The request from the previous generation has no effect on the counts.
	wantErr(t, finish(), nil)
	wantCounts(t, customCB, breaker.Counts{})
}

func TestGobreakerCustomIsSuccessful(t *testing.T) {
	// Upstream swaps the breaker's private isSuccessful and clears its
	// counts between the two halves. breaker reads Settings once, so the
	// function reads a switch; the counts are cleared by an Interval
	// ending.
	var strict atomic.Bool
	clk := &fakeClock{}
	cb := mustNew(t, breaker.Settings{
		IsSuccessful: func(err error) bool { return !strict.Load() || err == nil },
		Interval:     time.Minute,
		Clock:        clk,
	})

	for range 5 {
		wantErr(t, gbFail(cb), nil)
	}
	wantState(t, cb, breaker.StateClosed)
	wantCounts(t, cb, breaker.Counts{Requests: 5, TotalSuccesses: 5, ConsecutiveSuccesses: 5})

	clk.Advance(time.Minute)
	strict.Store(true)

	// Upstream makes 6 failures: gobreaker's default trips on the 6th,
	// breaker's on the 5th.
	for range 4 {
		wantErr(t, gbFail(cb), nil)
	}
	wantState(t, cb, breaker.StateClosed)
	wantCounts(t, cb, breaker.Counts{Requests: 4, TotalFailures: 4, ConsecutiveFailures: 4})
	wantErr(t, gbFail(cb), nil)
	wantState(t, cb, breaker.StateOpen)
}

func TestGobreakerCircuitBreakerInParallel(t *testing.T) {
	// Upstream also raises GOMAXPROCS to the number of CPUs; that is the
	// default, and the suite is run at several values with -cpu.
	customCB := mustNew(t, gbCustom(&fakeClock{}, nil))
	ch := make(chan error)

	var successCount, excludeCount atomic.Uint64

	const numReqs = 10000
	routine := func() {
		for i := range numReqs {
			var err error
			switch i % 2 {
			case 0:
				err = gbSucceed(customCB)
				successCount.Add(1)
			case 1:
				err = gbExclude(customCB)
				excludeCount.Add(1)
			}
			ch <- err
		}
	}

	const numRoutines = 10
	for range numRoutines {
		go routine()
	}

	total := numReqs * numRoutines
	for range total {
		wantErr(t, <-ch, nil)
	}

	// Upstream: Requests total, TotalExclusions the excluded requests;
	// breaker's Ignore takes them back off Requests.
	s := successCount.Load()
	if got := excludeCount.Load(); got+s != uint64(total) {
		t.Fatalf("%d successes and %d exclusions, want %d requests", s, got, total)
	}
	wantCounts(t, customCB, breaker.Counts{Requests: s, TotalSuccesses: s, ConsecutiveSuccesses: s})
}

func TestGobreakerIsExcludedAndIsSuccessfulCombination(t *testing.T) {
	// breaker has no IsExcluded: the excluded requests are finished with
	// Ignore by gbExclude; IsSuccessful judges the others.
	cb := mustNew(t, breaker.Settings{
		IsSuccessful: func(err error) bool { return err == nil },
		Clock:        &fakeClock{},
	})

	// Excluded errors are counted neither as successes nor as failures
	// (and, with Ignore, not as requests: upstream has Requests 3,
	// TotalExclusions 3).
	for range 3 {
		wantErr(t, gbExclude(cb), nil)
	}
	wantCounts(t, cb, breaker.Counts{})

	// nil errors are successes per IsSuccessful.
	for range 3 {
		wantErr(t, gbSucceed(cb), nil)
	}
	wantCounts(t, cb, breaker.Counts{Requests: 3, TotalSuccesses: 3, ConsecutiveSuccesses: 3})

	// Other errors are failures per IsSuccessful.
	for range 2 {
		wantErr(t, gbFail(cb), nil)
	}
	wantCounts(t, cb, breaker.Counts{Requests: 5, TotalSuccesses: 3, TotalFailures: 2, ConsecutiveFailures: 2})
}
