package breaker_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/groupexec/groupexec/breaker"
	"github.com/groupexec/groupexec/clock"
)

func ExampleNew() {
	cb, err := breaker.New(breaker.Settings{
		Name:    "payments",
		Timeout: 30 * time.Second,
		ReadyToTrip: func(c breaker.Counts) bool { // 3 failures in a row
			return c.ConsecutiveFailures >= 3
		},
		OnStateChange: func(name string, from, to breaker.State) {
			fmt.Printf("%s: %s -> %s\n", name, from, to)
		},
	})
	if err != nil {
		panic(err)
	}
	down := errors.New("payments unavailable")
	for range 4 {
		_, err := breaker.Execute(cb, func() (string, error) { return "", down })
		fmt.Println(err)
	}

	_, err = breaker.New(breaker.Settings{Timeout: -time.Second})
	fmt.Println(errors.Is(err, breaker.ErrInvalidSettings), err)
	// Output:
	// payments unavailable
	// payments unavailable
	// payments: closed -> open
	// payments unavailable
	// breaker: circuit breaker is open
	// true breaker: Settings.Timeout = -1s: must be >= 0 (0: the default, 60s)
}

// A breaker opens, refuses at once while open, then lets a probe through and
// closes when the probe succeeds. The clock is a fake, moved by hand.
func ExampleExecute() {
	clk := clock.NewFake(time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC))
	cb, _ := breaker.New(breaker.Settings{Timeout: 10 * time.Second, Clock: clk})

	healthy := false
	call := func() (int, error) {
		if !healthy {
			return 0, errors.New("timeout")
		}
		return 200, nil
	}
	for range 5 { // the default trips on the 5th consecutive failure
		_, _ = breaker.Execute(cb, call)
	}
	fmt.Println(cb.State())
	_, err := breaker.Execute(cb, call)
	fmt.Println(err, errors.Is(err, breaker.ErrOpenState))

	clk.Advance(10 * time.Second)
	healthy = true
	v, err := breaker.Execute(cb, call) // the probe
	fmt.Println(v, err, cb.State())
	// Output:
	// open
	// breaker: circuit breaker is open true
	// 200 <nil> closed
}

func ExampleCircuitBreaker_Allow() {
	cb, _ := breaker.New(breaker.Settings{})

	done, err := cb.Allow()
	if err != nil { // ErrOpenState or ErrTooManyRequests: do not call
		return
	}
	// ... do the work, however it is structured ...
	done(true) // exactly once: true for a success, false for a failure

	fmt.Printf("%+v\n", cb.Counts())
	// Output:
	// {Requests:1 TotalSuccesses:1 TotalFailures:0 ConsecutiveSuccesses:1 ConsecutiveFailures:0}
}

// A Ticket can also be finished with Ignore, for work cancelled before it
// said anything about the dependency: nothing is recorded, and a half-open
// probe slot is given back.
func ExampleCircuitBreaker_AllowTicket() {
	clk := clock.NewFake(time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC))
	cb, _ := breaker.New(breaker.Settings{MaxRequests: 1, Timeout: time.Second, Clock: clk})
	for range 5 {
		tk, _ := cb.AllowTicket()
		tk.Failure()
	}
	clk.Advance(time.Second)

	probe, _ := cb.AllowTicket()
	_, err := cb.AllowTicket()
	fmt.Println(cb.State(), probe.Probe(), err)

	probe.Ignore() // cancelled: the slot comes back, nothing counted
	probe, err = cb.AllowTicket()
	fmt.Println(cb.State(), err)
	probe.Success()
	fmt.Println(cb.State())
	// Output:
	// half-open true breaker: too many requests
	// half-open <nil>
	// closed
}
