package breaker_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/groupexec/groupexec/breaker"
)

// model is the reference: the state machine the package documents, written
// the obvious way, with a generation number and counts reset in place. Used
// serially, the breaker must behave exactly like it.
type model struct {
	s      breaker.Settings // with defaults applied
	state  breaker.State
	gen    int
	expiry time.Time // open: when it may half-open; closed with Interval: when counts clear
	counts breaker.Counts
	probes int
	log    []string
}

type modelTicket struct {
	gen   int
	probe bool
}

func newModel(s breaker.Settings, now time.Time) *model {
	if s.MaxRequests == 0 {
		s.MaxRequests = 1
	}
	if s.Timeout == 0 {
		s.Timeout = 60 * time.Second
	}
	if s.ReadyToTrip == nil {
		s.ReadyToTrip = func(c breaker.Counts) bool { return c.ConsecutiveFailures >= 5 }
	}
	m := &model{s: s}
	m.enter(breaker.StateClosed, now)
	return m
}

func (m *model) enter(s breaker.State, now time.Time) {
	m.gen++
	m.state = s
	m.counts = breaker.Counts{}
	m.expiry = time.Time{}
	switch {
	case s == breaker.StateOpen:
		m.expiry = now.Add(m.s.Timeout)
	case s == breaker.StateClosed && m.s.Interval > 0:
		m.expiry = now.Add(m.s.Interval)
	}
}

func (m *model) to(s breaker.State, now time.Time) {
	m.log = append(m.log, m.state.String()+"->"+s.String())
	m.enter(s, now)
}

func (m *model) admit(now time.Time) (modelTicket, error) {
	for {
		switch m.state {
		case breaker.StateClosed:
			if m.s.Interval > 0 && !now.Before(m.expiry) {
				m.enter(breaker.StateClosed, now) // a clearing, not a transition
			}
			m.counts.Requests++
			return modelTicket{gen: m.gen}, nil
		case breaker.StateOpen:
			if now.Before(m.expiry) {
				return modelTicket{}, breaker.ErrOpenState
			}
			m.to(breaker.StateHalfOpen, now)
		case breaker.StateHalfOpen:
			if m.probes >= int(m.s.MaxRequests) {
				return modelTicket{}, breaker.ErrTooManyRequests
			}
			m.probes++
			m.counts.Requests++
			return modelTicket{gen: m.gen, probe: true}, nil
		}
	}
}

type result int

const (
	resSuccess result = iota
	resFailure
	resIgnore
)

func (m *model) finish(tk modelTicket, r result, now time.Time) {
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
		if m.state == breaker.StateHalfOpen && c.ConsecutiveSuccesses >= uint64(m.s.MaxRequests) {
			m.to(breaker.StateClosed, now)
		}
	case resFailure:
		c.TotalFailures++
		c.ConsecutiveFailures++
		c.ConsecutiveSuccesses = 0
		ended := m.state == breaker.StateClosed && m.s.Interval > 0 && !now.Before(m.expiry)
		if m.state == breaker.StateHalfOpen || !ended && m.s.ReadyToTrip(*c) {
			m.to(breaker.StateOpen, now)
		}
	case resIgnore:
		c.Requests--
	}
}

// modelSettings are the configurations the model test cycles through.
var modelSettings = []breaker.Settings{
	{},
	{MaxRequests: 3, Timeout: 5 * time.Second},
	{MaxRequests: 2, Timeout: 3 * time.Second, Interval: 7 * time.Second},
	{MaxRequests: 1, Timeout: time.Second, Interval: 2 * time.Second,
		ReadyToTrip: func(c breaker.Counts) bool { return c.Requests >= 4 && c.TotalFailures*2 >= c.Requests }},
	{MaxRequests: 4, Timeout: 10 * time.Second,
		ReadyToTrip: func(c breaker.Counts) bool { return c.ConsecutiveFailures >= 2 }},
}

// runModel drives the breaker and the model with the same operations, read
// from ops, and fails at the first difference in a returned error, the
// state, the counts or the reported transitions.
// With spread, the breaker's counters are in per-core cells from the start,
// as after contention.
func runModel(t *testing.T, settings breaker.Settings, spread bool, ops []byte) {
	clk := &fakeClock{}
	var rec recorder
	s := settings
	s.Clock = clk
	s.OnStateChange = rec.record
	cb := mustNew(t, s)
	if spread {
		breaker.Spread(cb)
	}
	m := newModel(settings, clk.Now())

	type pair struct {
		tk breaker.Ticket
		mt modelTicket
	}
	var open []pair // admitted, not finished
	var trace []string
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("%s\nafter: %v", fmt.Sprintf(format, args...), trace)
	}
	for len(ops) > 0 {
		op := ops[0]
		arg := 0
		if len(ops) > 1 {
			arg = int(ops[1])
		}
		ops = ops[1:]
		now := clk.Now()
		switch op % 8 {
		case 0, 1: // admit, keep the ticket
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
		case 2, 3, 4: // finish one outstanding request
			if len(open) == 0 {
				continue
			}
			i := arg % len(open)
			p := open[i]
			open = append(open[:i], open[i+1:]...)
			r := result(op % 8 % 3) // 2: failure, 3: ignore, 4: success
			switch r {
			case resSuccess:
				p.tk.Success()
			case resFailure:
				p.tk.Failure()
			case resIgnore:
				p.tk.Ignore()
			}
			m.finish(p.mt, r, now)
			trace = append(trace, fmt.Sprintf("finish#%d:%d", i, r))
		case 5: // Execute or Allow: admit and finish at once
			if arg%8 >= 6 {
				done, err := cb.Allow()
				mt, merr := m.admit(now)
				if err != merr {
					fail("Allow: %v, model %v", err, merr)
				}
				if err == nil {
					done(arg%8 == 6)
					if arg%8 == 6 {
						m.finish(mt, resSuccess, now)
					} else {
						m.finish(mt, resFailure, now)
					}
				}
				trace = append(trace, fmt.Sprintf("allow:%v", arg%8 == 6))
				break
			}
			ok := arg%4 != 0
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
				}
			}
			trace = append(trace, fmt.Sprintf("execute:%v", ok))
			if merr == nil && !ok {
				merr = errBoom
			}
			if !errors.Is(err, merr) || (merr == nil) != (err == nil) {
				fail("Execute: %v, model %v", err, merr)
			}
		case 6, 7: // time passes: 0 to 2.55 s, or whole seconds
			d := time.Duration(arg) * 10 * time.Millisecond
			if op%8 == 7 {
				d = time.Duration(arg%16) * time.Second
			}
			clk.Advance(d)
			trace = append(trace, fmt.Sprintf("+%v", d))
		}
		if got, want := cb.State(), m.state; got != want {
			fail("State() = %v, model %v", got, want)
		}
		if got, want := cb.Counts(), m.counts; got != want {
			fail("Counts() = %+v, model %+v", got, want)
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

// TestModel compares the breaker with the model on long random runs.
func TestModel(t *testing.T) {
	runs, length := 200, 2000
	if testing.Short() {
		runs = 20
	}
	for i := range runs {
		r := rand.New(rand.NewPCG(uint64(i), 7))
		ops := make([]byte, length)
		for j := range ops {
			ops[j] = byte(r.Uint32())
		}
		s := modelSettings[i%len(modelSettings)]
		spread := i%2 == 1
		t.Run(fmt.Sprintf("seed=%d,spread=%v", i, spread), func(t *testing.T) { runModel(t, s, spread, ops) })
	}
}

// FuzzModel is the same comparison driven by the fuzzer: the first byte
// picks the settings and whether the counters are spread, the rest are
// operations. Its seed corpus runs as a
// plain test; go test -fuzz FuzzModel ./breaker explores further.
func FuzzModel(f *testing.F) {
	f.Add([]byte{0, 5, 0, 5, 0, 5, 0, 5, 0, 5, 0, 7, 60, 0, 4, 0})                     // trip on defaults, recover
	f.Add([]byte{1, 0, 0, 0, 0, 2, 0, 2, 0, 2, 0, 2, 0, 2, 0, 7, 5, 0, 0, 0, 0, 4, 1}) // half-open bound
	f.Add([]byte{2, 0, 1, 6, 200, 7, 7, 5, 0, 3, 0, 2, 0})                             // interval clearing
	f.Add([]byte{3, 5, 1, 5, 0, 5, 1, 5, 0, 7, 1, 0, 0, 3, 0})                         // ratio trip, ignore
	f.Add([]byte{4, 0, 0, 2, 1, 2, 0, 7, 10, 0, 0, 0, 0, 0, 4, 0, 2, 0, 4, 0})         // late results
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		runModel(t, modelSettings[int(data[0])%len(modelSettings)], data[0]&0x80 != 0, data[1:])
	})
}
