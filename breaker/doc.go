// Package breaker is a circuit breaker: it stops calling a dependency that
// keeps failing, so that callers fail fast and the dependency gets room to
// recover, then lets a few probes through to see whether it has.
//
//	cb, err := breaker.New(breaker.Settings{Name: "payments", Timeout: 30 * time.Second})
//	if err != nil { /* a negative duration: errors.Is(err, breaker.ErrInvalidSettings) */ }
//	v, err := breaker.Execute(cb, func() (Receipt, error) { return pay(ctx, order) })
//	if errors.Is(err, breaker.ErrOpenState) { /* refused at once; pay was not called */ }
//
// A breaker is closed, open or half-open. Closed, it lets every request
// through and counts outcomes; when Settings.ReadyToTrip says so (by default
// on the 5th consecutive failure) it opens. Open, it refuses every request
// with ErrOpenState until Settings.Timeout has passed; the first request
// after that moves it to half-open. Half-open, it lets at most
// Settings.MaxRequests requests (probes) be in flight and refuses the others
// with ErrTooManyRequests; MaxRequests consecutive successes close it, and
// any failure opens it again. Every change of state starts a new generation:
// an outcome reported after the generation that let its request through has
// ended is not counted, so a slow request from before a trip can neither
// close nor reopen the breaker.
//
// RemainingDelay says how long an open breaker has left before it lets a
// probe through (0 in every other state): what a service refusing a request
// with ErrOpenState can tell its client to wait.
//
// Besides Execute there are two two-step forms: Allow returns a done
// func(success bool), and AllowTicket returns a Ticket that can also be
// finished with Ignore, which records nothing and gives a half-open probe
// slot back (for work cancelled before it said anything about the
// dependency).
//
// A panic in the function given to Execute counts as a failure and is
// re-raised in Execute's caller, even when a Settings.OnStateChange or
// ReadyToTrip called as the failure is recorded exits the goroutine
// (runtime.Goexit). A panic in Settings.OnStateChange is recovered.
//
// The breaker takes no lock and starts no goroutine. Its state and the
// counts of that state are one generation, published through one atomic
// pointer; counts are atomic counters; every change of state or clearing of
// counts is a compare-and-swap that exactly one caller wins. In the closed
// state a successful request costs two atomic read-modify-writes and no
// allocation (Execute; Allow and its done; AllowTicket and its Ticket); a
// failure costs a few more and a call of ReadyToTrip. When two callers first
// collide on the counters, they are spread over per-core cache lines for the
// life of the breaker. Allocation happens only when a generation starts (a
// state change or a clearing: 192 bytes, and for the closed state the done
// function Allow hands out, 24 more, plus 128 bytes per cell, 2 cells per
// core from 4 to 64, once the breaker has been contended), at that first
// collision, and in Allow for a half-open probe's done.
//
// The examples (example_test.go), run by go test, show New, Execute, Allow
// and AllowTicket.
package breaker
