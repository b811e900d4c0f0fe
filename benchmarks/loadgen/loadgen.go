// Package loadgen is a small HTTP load generator for the gateway benchmarks:
// an open-loop generator at a constant rate (Open) and a closed-loop one
// with a fixed number of clients (Closed). It exists because vegeta, the
// usual choice, cannot be downloaded in this project's environment.
//
// Open is free of coordinated omission: request i is scheduled at
// start + i/rate, whatever happened to the requests before it, and its
// latency runs from that scheduled time, not from the moment it was sent. A
// generator that falls behind (a busy machine, a MaxInFlight cap) therefore
// charges its own lag to the requests it delayed instead of hiding it, as a
// server that stalls would see its stall counted in every request that
// arrived meanwhile.
//
// Both generators read the time from a clock.Clock (OpenConfig.Clock,
// ClosedConfig.Clock; nil is the system clock), so their tests move the
// time by hand instead of waiting on it.
package loadgen

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/groupexec/groupexec/clock"
)

// Target is what every request of a run asks for.
type Target struct {
	Method string // default GET
	URL    string
	Header http.Header // copied into every request
}

func (t Target) request(ctx context.Context) (*http.Request, error) {
	m := t.Method
	if m == "" {
		m = http.MethodGet
	}
	req, err := http.NewRequestWithContext(ctx, m, t.URL, nil)
	if err != nil {
		return nil, err
	}
	for k, vs := range t.Header {
		req.Header[k] = vs
	}
	return req, nil
}

// OpenConfig configures an open-loop run.
type OpenConfig struct {
	Target   Target
	Client   *http.Client  // default http.DefaultClient; the caller owns it
	Rate     float64       // requests per second, > 0
	Duration time.Duration // requests are scheduled in [Start, Start+Duration)
	// Start is the time request 0 is scheduled at, so that concurrent runs
	// (one per tenant) share a time axis. Zero means now.
	Start time.Time
	// Timeout bounds each request from its scheduled time; a request still
	// unanswered then is cancelled and recorded with Err set. Default 10s.
	// It also bounds how long Open runs past Duration.
	Timeout time.Duration
	// MaxInFlight, when > 0, caps the requests outstanding at once: the
	// scheduler waits for one to finish before sending the next, and the
	// wait counts in the delayed requests' latencies. 0: no cap.
	MaxInFlight int
	// Clock is the time the schedule, the timeouts, the lags and the
	// latencies are read on. Nil: clock.Real.
	Clock clock.Clock
}

// Result is one request's outcome.
type Result struct {
	Seq       int
	Scheduled time.Duration // when it was due, from the run's start
	Lag       time.Duration // how late it was sent after it was due
	Latency   time.Duration // from the scheduled time to the end of the response body
	Code      int           // HTTP status; 0 when Err is set
	Err       error         // transport error, timeout or body read error
}

const defaultTimeout = 10 * time.Second

// Open sends requests at cfg.Rate for cfg.Duration and returns every
// request's result, in schedule order. It returns once every request has
// finished: at most Timeout after the last one was due. When ctx ends, no
// more requests are sent and those in flight are cancelled (recorded with
// Err set); Open then returns what it has and ctx's error.
func Open(ctx context.Context, cfg OpenConfig) (*Results, error) {
	if cfg.Rate <= 0 || cfg.Duration <= 0 {
		return nil, fmt.Errorf("loadgen: rate %v and duration %v must be > 0", cfg.Rate, cfg.Duration)
	}
	client, timeout, clk, err := prepare(ctx, cfg.Target, cfg.Client, cfg.Timeout, cfg.Clock)
	if err != nil {
		return nil, err
	}
	start := cfg.Start
	if start.IsZero() {
		start = clk.Now()
	}
	// The count is fixed up front, so the same config always sends the same
	// number of requests however late the scheduler runs.
	n := int(cfg.Rate * cfg.Duration.Seconds())
	if due := time.Duration(float64(n) * float64(time.Second) / cfg.Rate); due < cfg.Duration {
		n++ // request n is due before the end too
	}
	res := &Results{Start: start, Duration: cfg.Duration, List: make([]Result, n)}

	var slots chan struct{}
	if cfg.MaxInFlight > 0 {
		slots = make(chan struct{}, cfg.MaxInFlight)
	}
	var wg sync.WaitGroup
	// One wait at a time: each send on wake is received before the next
	// timer is set, so the buffer holds at most a stopped wait's late send.
	wake := make(chan struct{}, 1)
	ring := func() { wake <- struct{}{} }
	sent := 0
schedule:
	for i := range n {
		// Computed from i, never by adding intervals: rounding does not
		// accumulate, and a late send does not push the ones after it.
		due := start.Add(time.Duration(float64(i) * float64(time.Second) / cfg.Rate))
		if d := due.Sub(clk.Now()); d > 0 {
			timer := clk.AfterFunc(d, ring)
			select {
			case <-wake:
			case <-ctx.Done():
				timer.Stop()
				break schedule
			}
		}
		if slots != nil {
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				break schedule
			}
		}
		if ctx.Err() != nil {
			break
		}
		sent++
		wg.Go(func() {
			if slots != nil {
				defer func() { <-slots }()
			}
			res.List[i] = do(ctx, clk, client, cfg.Target, i, start, due, timeout)
		})
	}
	wg.Wait()
	res.List = res.List[:sent]
	return res, ctx.Err()
}

// do sends one request due at due and records it.
func do(ctx context.Context, clk clock.Clock, client *http.Client, t Target, seq int, start, due time.Time, timeout time.Duration) Result {
	now := clk.Now()
	r := Result{Seq: seq, Scheduled: due.Sub(start), Lag: max(0, now.Sub(due))}
	// context.WithDeadline on clk: the deadline ends the request with
	// context.DeadlineExceeded as its cause, which is what http.Transport
	// returns. A request already past its deadline goes to the client
	// with its context ended, as WithDeadline would have it.
	rctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if left := due.Add(timeout).Sub(now); left > 0 {
		deadline := clk.AfterFunc(left, func() { cancel(context.DeadlineExceeded) })
		defer deadline.Stop()
	} else {
		cancel(context.DeadlineExceeded)
	}
	r.Code, r.Err = send(rctx, client, t)
	// A RoundTripper that returns ctx.Err() reports context.Canceled;
	// the deadline, which ended it, is what IsTimeout looks for.
	if r.Err != nil && !IsTimeout(r.Err) && IsTimeout(context.Cause(rctx)) {
		r.Err = fmt.Errorf("%w: %w", context.DeadlineExceeded, r.Err)
	}
	r.Latency = clk.Now().Sub(due)
	return r
}

// send does one request and reads its whole body, so the latency covers the
// full response and the connection can be reused.
func send(ctx context.Context, client *http.Client, t Target) (int, error) {
	req, err := t.request(ctx)
	if err != nil {
		return 0, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil {
		return 0, err
	}
	return resp.StatusCode, nil
}

// ClosedConfig configures a closed-loop run.
type ClosedConfig struct {
	Target   Target
	Client   *http.Client  // default http.DefaultClient; the caller owns it
	Clients  int           // concurrent clients, each sending its next request when the last is answered
	Duration time.Duration // no request is sent after this
	Timeout  time.Duration // per request; default 10s
	Clock    clock.Clock   // the time sends, the end and latencies are read on; nil: clock.Real
}

// Closed runs cfg.Clients loops, each sending a request as soon as its
// previous one is answered, for cfg.Duration. It measures the throughput
// the server sustains at that concurrency: each Result's latency runs from
// its send (there is no schedule), and Scheduled is its send time. It
// returns at most Timeout after Duration.
func Closed(ctx context.Context, cfg ClosedConfig) (*Results, error) {
	if cfg.Clients <= 0 || cfg.Duration <= 0 {
		return nil, fmt.Errorf("loadgen: clients %d and duration %v must be > 0", cfg.Clients, cfg.Duration)
	}
	client, timeout, clk, err := prepare(ctx, cfg.Target, cfg.Client, cfg.Timeout, cfg.Clock)
	if err != nil {
		return nil, err
	}
	start := clk.Now()
	end := start.Add(cfg.Duration)
	per := make([][]Result, cfg.Clients)
	var wg sync.WaitGroup
	for c := range cfg.Clients {
		wg.Go(func() {
			for ctx.Err() == nil {
				now := clk.Now()
				if !now.Before(end) {
					return
				}
				per[c] = append(per[c], do(ctx, clk, client, cfg.Target, 0, start, now, timeout))
			}
		})
	}
	wg.Wait()
	res := &Results{Start: start, Duration: cfg.Duration}
	for _, l := range per {
		res.List = append(res.List, l...)
	}
	res.sortBySchedule()
	return res, ctx.Err()
}

// prepare checks that target makes a valid request and fills in the
// defaults both loops share: the client, the per-request timeout and the
// clock.
func prepare(ctx context.Context, target Target, client *http.Client, timeout time.Duration, clk clock.Clock) (*http.Client, time.Duration, clock.Clock, error) {
	if _, err := target.request(ctx); err != nil {
		return nil, 0, nil, fmt.Errorf("loadgen: %w", err)
	}
	if client == nil {
		client = http.DefaultClient
	}
	if clk == nil {
		clk = clock.Real
	}
	return client, orDefault(timeout, defaultTimeout), clk, nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// IsTimeout reports whether a result's error is its deadline.
func IsTimeout(err error) bool { return errors.Is(err, context.DeadlineExceeded) }
