package breaker_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/groupexec/groupexec/breaker"
	"github.com/groupexec/groupexec/clock"
)

// stepModel is a second reference, for clocks that step back and jump far
// ahead, written from Settings' documentation in terms of elapsed time
// since a state began rather than of a deadline: open ends once
// Timeout has elapsed since it opened; a closed period ends once Interval
// has elapsed since it started; a reading earlier than the start (a clock
// stepped back) restarts the Timeout, or ends the period. A lock, no
// atomics, counts reset in place.
type stepModel struct {
	maxRequests       uint64
	timeout, interval time.Duration
	readyToTrip       func(breaker.Counts) bool

	state  breaker.State
	gen    int
	since  time.Time // when the state (or the closed period) began
	counts breaker.Counts
	probes uint64
	log    []string
}

type stepTicket struct {
	gen   int
	probe bool
}

func newStepModel(s breaker.Settings, now time.Time) *stepModel {
	m := &stepModel{
		maxRequests: uint64(s.MaxRequests),
		timeout:     s.Timeout,
		interval:    s.Interval,
		readyToTrip: s.ReadyToTrip,
	}
	if m.maxRequests == 0 {
		m.maxRequests = 1
	}
	if m.timeout == 0 {
		m.timeout = time.Minute
	}
	if m.readyToTrip == nil {
		m.readyToTrip = func(c breaker.Counts) bool { return c.ConsecutiveFailures >= 5 }
	}
	m.enter(breaker.StateClosed, now)
	return m
}

func (m *stepModel) enter(s breaker.State, now time.Time) {
	m.gen++
	m.state, m.since, m.counts = s, now, breaker.Counts{}
}

func (m *stepModel) to(s breaker.State, now time.Time) {
	m.log = append(m.log, m.state.String()+"->"+s.String())
	m.enter(s, now)
}

// over reports whether d has elapsed since m.since at now, or now is
// earlier than m.since. Time.Sub saturates, so compare without it where
// the difference may not fit a Duration.
func (m *stepModel) over(d time.Duration, now time.Time) bool {
	if now.Before(m.since) {
		return true
	}
	return elapsedAtLeast(m.since, now, d)
}

// elapsedAtLeast reports whether now - from >= d, for now >= from, exactly:
// in seconds and nanoseconds, with no Duration overflow.
func elapsedAtLeast(from, now time.Time, d time.Duration) bool {
	ds := now.Unix() - from.Unix()
	dn := int64(now.Nanosecond()) - int64(from.Nanosecond())
	if dn < 0 {
		ds, dn = ds-1, dn+1e9
	}
	ws, wn := int64(d/time.Second), int64(d%time.Second)
	return ds > ws || ds == ws && dn >= wn
}

func (m *stepModel) admit(now time.Time) (stepTicket, error) {
	for {
		switch m.state {
		case breaker.StateClosed:
			if m.interval > 0 && m.over(m.interval, now) {
				m.enter(breaker.StateClosed, now) // a clearing, not a transition
			}
			m.counts.Requests++
			return stepTicket{gen: m.gen}, nil
		case breaker.StateOpen:
			if now.Before(m.since) {
				m.enter(breaker.StateOpen, now) // the Timeout restarts, unreported
				return stepTicket{}, breaker.ErrOpenState
			}
			if !m.over(m.timeout, now) {
				return stepTicket{}, breaker.ErrOpenState
			}
			m.to(breaker.StateHalfOpen, now)
		case breaker.StateHalfOpen:
			if m.probes >= m.maxRequests {
				return stepTicket{}, breaker.ErrTooManyRequests
			}
			m.probes++
			m.counts.Requests++
			return stepTicket{gen: m.gen, probe: true}, nil
		}
	}
}

func (m *stepModel) finish(tk stepTicket, r result, now time.Time) {
	if tk.probe {
		m.probes--
	}
	if tk.gen != m.gen {
		return
	}
	c := &m.counts
	switch r {
	case resSuccess:
		c.TotalSuccesses++
		c.ConsecutiveSuccesses++
		c.ConsecutiveFailures = 0
		if m.state == breaker.StateHalfOpen && c.ConsecutiveSuccesses >= m.maxRequests {
			m.to(breaker.StateClosed, now)
		}
	case resFailure:
		c.TotalFailures++
		c.ConsecutiveFailures++
		c.ConsecutiveSuccesses = 0
		switch {
		case m.state == breaker.StateHalfOpen:
			m.to(breaker.StateOpen, now)
		case m.interval > 0 && m.over(m.interval, now):
			// The period has ended: its counts no longer trip.
		case m.readyToTrip(*c):
			m.to(breaker.StateOpen, now)
		}
	case resIgnore:
		c.Requests--
	}
}

// remaining is what RemainingDelay must return.
func (m *stepModel) remaining(now time.Time) time.Duration {
	if m.state != breaker.StateOpen {
		return 0
	}
	if now.Before(m.since) {
		return m.timeout // the next request restarts the Timeout
	}
	if m.over(m.timeout, now) {
		return 0
	}
	return m.timeout - now.Sub(m.since)
}

// timeClock is a serial clock.Clock holding any time.Time, so that it can
// step back, or jump further ahead than an int64 of nanoseconds reaches.
type timeClock struct{ t time.Time }

func (c *timeClock) Now() time.Time { return c.t }
func (c *timeClock) AfterFunc(time.Duration, func()) clock.Timer {
	panic("breaker: AfterFunc called; a breaker must only read the time")
}

// stepSettings are the configurations the clock-stepping model cycles
// through: the edges of every setting.
var stepSettings = []breaker.Settings{
	{},
	{MaxRequests: 1, Timeout: time.Nanosecond},
	{MaxRequests: 2, Timeout: 3 * time.Second, Interval: time.Nanosecond},
	{MaxRequests: 3, Timeout: 5 * time.Second, Interval: 7 * time.Second},
	{MaxRequests: math.MaxUint32, Timeout: time.Second, Interval: 2 * time.Second},
	{MaxRequests: 2, Timeout: math.MaxInt64, Interval: math.MaxInt64},
	{MaxRequests: 1, Timeout: 100 * 365 * 24 * time.Hour, Interval: 200 * 365 * 24 * time.Hour,
		ReadyToTrip: func(c breaker.Counts) bool { return c.ConsecutiveFailures >= 2 }},
	{MaxRequests: 4, Timeout: 2 * time.Second, Interval: 3 * time.Second,
		ReadyToTrip: func(c breaker.Counts) bool { return c.Requests >= 3 && c.TotalFailures*2 >= c.Requests }},
}

// clockStep returns the clock's next reading: a small step ahead or back,
// a step of about a Timeout, a jump of centuries either way, or a jump to
// the edges of what time.Time holds.
func clockStep(r *rand.Rand, now time.Time) time.Time {
	switch r.IntN(16) {
	case 0:
		return now.Add(-time.Duration(r.IntN(20)) * time.Second)
	case 1:
		return now.Add(-time.Nanosecond)
	case 2:
		return now.AddDate(r.IntN(600)-300, 0, 0)
	case 3:
		return now.Add(time.Duration(r.Int64()))
	case 4:
		return now.Add(-time.Duration(r.Int64()))
	case 5:
		return time.Unix(math.MaxInt64/4-int64(r.IntN(1000)), 999_999_999) // far past year 9999
	case 6:
		return time.Unix(-math.MaxInt64/4+int64(r.IntN(1000)), 0)
	case 7, 8:
		return now.Add(time.Duration(r.IntN(8)) * time.Second)
	default:
		return now.Add(time.Duration(r.IntN(300)) * 10 * time.Millisecond)
	}
}

// runStepModel drives a breaker and the step model with n random
// operations from r and fails at the first difference.
func runStepModel(t *testing.T, settings breaker.Settings, spread bool, r *rand.Rand, n int) {
	clk := &timeClock{t: t0}
	var rec recorder
	s := settings
	s.Clock = clk
	s.OnStateChange = rec.record
	cb := mustNew(t, s)
	if spread {
		breaker.Spread(cb)
	}
	m := newStepModel(settings, clk.Now())
	type pair struct {
		tk breaker.Ticket
		mt stepTicket
	}
	var open []pair
	var trace []string
	fail := func(format string, args ...any) {
		t.Helper()
		if len(trace) > 40 {
			trace = trace[len(trace)-40:]
		}
		t.Fatalf("%s\nlast operations: %v", fmt.Sprintf(format, args...), trace)
	}
	for range n {
		now := clk.Now()
		switch op := r.IntN(10); {
		case op < 3:
			tk, err := cb.AllowTicket()
			mt, merr := m.admit(now)
			trace = append(trace, "admit")
			if err != merr {
				fail("AllowTicket: %v, model %v", err, merr)
			}
			if err == nil {
				if tk.Probe() != mt.probe {
					fail("Probe() = %v, model %v", tk.Probe(), mt.probe)
				}
				open = append(open, pair{tk, mt})
			}
		case op < 6:
			if len(open) == 0 {
				continue
			}
			i := r.IntN(len(open))
			p := open[i]
			open = append(open[:i], open[i+1:]...)
			res := result(r.IntN(3))
			switch res {
			case resSuccess:
				p.tk.Success()
			case resFailure:
				p.tk.Failure()
			case resIgnore:
				p.tk.Ignore()
			}
			m.finish(p.mt, res, now)
			trace = append(trace, fmt.Sprintf("finish#%d:%d", i, res))
		case op < 8:
			ok := r.IntN(3) != 0
			_, err := breaker.Execute(cb, func() (int, error) {
				if ok {
					return 0, nil
				}
				return 0, errBoom
			})
			mt, merr := m.admit(now)
			if merr == nil {
				if ok {
					m.finish(mt, resSuccess, now)
				} else {
					m.finish(mt, resFailure, now)
					merr = errBoom
				}
			}
			trace = append(trace, fmt.Sprintf("execute:%v", ok))
			if err != merr {
				fail("Execute: %v, model %v", err, merr)
			}
		default:
			clk.t = clockStep(r, now)
			trace = append(trace, "clock="+clk.t.Format(time.RFC3339Nano))
		}
		if got, want := cb.State(), m.state; got != want {
			fail("State() = %v, model %v", got, want)
		}
		if got, want := cb.Counts(), m.counts; got != want {
			fail("Counts() = %+v, model %+v", got, want)
		}
		if got, want := cb.RemainingDelay(), m.remaining(clk.Now()); got != want {
			fail("RemainingDelay() = %v, model %v", got, want)
		}
		if got, want := rec.take(), m.log; !equal(got, want) {
			fail("transitions %v, model %v", got, want)
		}
		m.log = nil
	}
	for _, p := range open {
		p.tk.Ignore()
	}
}

// TestModelWithSteppingClock compares the breaker with the step model on
// random runs whose clock steps back, jumps centuries, and reaches the
// edges of time.Time, over settings at their edges (MaxRequests 1 to
// 2^32-1, Timeout and Interval from 1ns to the largest Duration).
func TestModelWithSteppingClock(t *testing.T) {
	runs, length := 240, 1500
	if testing.Short() {
		runs = 24
	}
	for i := range runs {
		s := stepSettings[i%len(stepSettings)]
		spread := i/len(stepSettings)%2 == 1
		t.Run(fmt.Sprintf("seed=%d,spread=%v", i, spread), func(t *testing.T) {
			runStepModel(t, s, spread, rand.New(rand.NewPCG(uint64(i), 11)), length)
		})
	}
}
