package bulkhead_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/groupexec/groupexec/bulkhead"
	"github.com/groupexec/groupexec/clock"
)

// bhModel is the reference: the bulkhead the package documents, written the
// obvious way (one lock, counts and a FIFO list). Driven serially, with the
// same fake clock, the bulkhead must make exactly its decisions.
type bhModel struct {
	limit, used int
	draining    bool
	depth       int
	maxWait     time.Duration
	queue       []*bhWaiter
}

// bhWaiter is a request queued in the model, and the Acquire call waiting for
// it in the bulkhead.
type bhWaiter struct {
	weight   int
	deadline time.Time
	cancel   context.CancelFunc
	call     *pending

	// The model's decision, once it leaves the queue.
	decided bool
	granted bool
	grantAt time.Time
	limit   int // in force at the grant
	err     error
}

// fits is groupsem's rule.
func (m *bhModel) fits(n int) bool { return n <= m.limit-m.used }

// observe ends a drain once in-flight is below the limit.
func (m *bhModel) observe() {
	if m.draining && m.used < m.limit {
		m.draining = false
	}
}

// dispatch times out the waiters past their maximum wait, then grants the
// others in order while they fit, passing over those heavier than the
// limit. It reports whether a waiter the limit can serve is left waiting,
// and appends the waiters it decided to out.
func (m *bhModel) dispatch(now time.Time, out []*bhWaiter) (bool, []*bhWaiter) {
	for len(m.queue) > 0 && !now.Before(m.queue[0].deadline) {
		w := m.queue[0]
		m.queue = m.queue[1:]
		w.decided, w.err = true, bulkhead.ErrQueueTimeout
		out = append(out, w)
	}
	blocked := false
	keep := m.queue[:0]
	for i, w := range m.queue {
		switch {
		case blocked || w.weight > m.limit:
			keep = append(keep, w)
		case !m.fits(w.weight):
			blocked = true
			keep = append(keep, m.queue[i])
		default:
			m.used += w.weight
			w.decided, w.granted, w.grantAt, w.limit = true, true, now, m.limit
			out = append(out, w)
		}
	}
	clear(m.queue[len(keep):])
	m.queue = keep
	return blocked, out
}

// admit decides a new request of weight n: granted, refused (err), or
// queued (both false and nil).
func (m *bhModel) admit(now time.Time, n int, wait bool) (granted bool, decided []*bhWaiter, err error) {
	blocked, decided := m.dispatch(now, nil)
	if !blocked && m.fits(n) {
		m.used += n
		return true, decided, nil
	}
	switch {
	case m.draining:
		return false, decided, bulkhead.ErrDraining
	case !wait || n > m.limit:
		return false, decided, bulkhead.ErrAtCapacity
	case len(m.queue) >= m.depth:
		return false, decided, bulkhead.ErrQueueSaturated
	}
	return false, decided, nil
}

func (m *bhModel) release(n int) {
	m.used -= n
	m.observe()
}

func (m *bhModel) setLimit(n int) {
	m.limit = n
	switch {
	case m.used > n:
		m.draining = true
	case m.used < n:
		m.draining = false
	}
}

func (m *bhModel) remove(w *bhWaiter) {
	for i, q := range m.queue {
		if q == w {
			m.queue = append(m.queue[:i], m.queue[i+1:]...)
			return
		}
	}
	panic("not queued")
}

// bhConfig is one bulkhead configuration the model test runs.
type bhConfig struct {
	name     string
	queue    bool
	observed bool // an event log: every acquire and release under the mutex
	gated    bool // a required capability: acquires under the mutex, releases lock-free
}

var bhConfigs = []bhConfig{
	{name: "plain", queue: true},
	{name: "no-queue"},
	{name: "observed", queue: true, observed: true},
	{name: "gated", queue: true, gated: true},
}

// TestModelComparison drives the bulkhead and the model with the same random
// operations (try, acquire that may wait, release, double release, cancel a
// waiter, change the limit, let time pass), one at a time, each operation's
// effects complete before the next, and fails at the first difference in a
// decision, a refusal's code and numbers, a permit's weight, limit, issue
// time or ID order, or a snapshot; CheckInvariants runs after every step.
func TestModelComparison(t *testing.T) {
	runs, steps := 24, 400
	if testing.Short() {
		runs, steps = 8, 200
	}
	for i := range runs {
		cfg := bhConfigs[i%len(bhConfigs)]
		seed := uint64(i)
		t.Run(fmt.Sprintf("%s/seed=%d", cfg.name, seed), func(t *testing.T) {
			runBulkheadModel(t, cfg, rand.New(rand.NewPCG(seed, 11)), steps)
		})
	}
}

func runBulkheadModel(t *testing.T, cfg bhConfig, r *rand.Rand, steps int) {
	const maxWait = 10 * time.Second
	clk := clock.NewFake(t0)
	limit := 1 + r.IntN(5)
	opts := []bulkhead.Option{bulkhead.WithClock(clk)}
	m := &bhModel{limit: limit}
	if cfg.queue {
		m.depth, m.maxWait = 1+r.IntN(4), maxWait
		opts = append(opts, bulkhead.WithQueue(m.depth, maxWait))
	}
	if cfg.observed {
		opts = append(opts, bulkhead.WithEventLog(64))
	}
	ctx := bg
	if cfg.gated {
		opts = append(opts, bulkhead.WithRequiredCapability("remote"))
		ctx = remote
	}
	b := newBH(t, limit, opts...)

	var (
		held     []bulkhead.Permit // out, in the model too
		released []bulkhead.Permit // released once
		lastID   uint64
		trace    []string
	)
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("%s\nafter %v", fmt.Sprintf(format, args...), trace)
	}
	issued := func(p bulkhead.Permit, n, lim int, at time.Time) {
		t.Helper()
		if p.Weight() != n || p.Limit() != lim || !p.IssuedAt().Equal(at) {
			fail("permit %d: weight %d, limit %d, issued %v; want %d, %d, %v", p.ID(), p.Weight(), p.Limit(), p.IssuedAt(), n, lim, at)
		}
		if p.ID() <= lastID {
			fail("permit ID %d after %d", p.ID(), lastID)
		}
		lastID = p.ID()
		held = append(held, p)
	}
	// settle waits for the Acquire calls the model decided to return, in the
	// model's order, and checks their results.
	settle := func(ws []*bhWaiter) {
		t.Helper()
		for _, w := range ws {
			p, err := w.call.wait(t)
			w.cancel()
			switch {
			case w.granted:
				if err != nil {
					fail("queued Acquire(%d): %v, want a permit", w.weight, err)
				}
				issued(p, w.weight, w.limit, w.grantAt)
			case !errors.Is(err, w.err):
				fail("queued Acquire(%d): %v, want %v", w.weight, err, w.err)
			case errors.Is(err, bulkhead.ErrQueueTimeout):
				wantErr(t, err, bulkhead.ErrQueueTimeout)
				var rej *bulkhead.RejectedError
				if !errors.As(err, &rej) || rej.Weight != w.weight {
					fail("queue timeout %v: want a *RejectedError of weight %d", err, w.weight)
				}
			}
		}
	}
	refused := func(op string, n int, err, want error) {
		t.Helper()
		if !errors.Is(err, want) {
			fail("%s(%d): %v, want %v", op, n, err, want)
		}
		var rej *bulkhead.RejectedError
		if !errors.As(err, &rej) {
			fail("%s(%d): %v is not a *RejectedError", op, n, err)
		}
		// The numbers at the refusal. A lock-free refusal reads no queue,
		// and is made only when none waits.
		if rej.Weight != n || rej.Limit != m.limit || rej.InFlight != m.used || rej.QueueDepth != len(m.queue) {
			fail("%s(%d) refused with weight %d, limit %d, in flight %d, queued %d; want %d, %d, %d, %d",
				op, n, rej.Weight, rej.Limit, rej.InFlight, rej.QueueDepth, n, m.limit, m.used, len(m.queue))
		}
	}

	for range steps {
		now := clk.Now()
		switch op := r.IntN(20); {
		case op < 5: // TryAcquire
			n := 1 + r.IntN(m.limit+1)
			p, err := b.TryAcquire(ctx, n)
			ok, decided, want := m.admit(now, n, false)
			trace = append(trace, fmt.Sprintf("try(%d)", n))
			settle(decided)
			if ok {
				if err != nil {
					fail("TryAcquire(%d): %v, want a permit", n, err)
				}
				issued(p, n, m.limit, now)
			} else {
				refused("TryAcquire", n, err, want)
			}
		case op < 10: // Acquire, which may queue
			n := 1 + r.IntN(m.limit+1)
			wctx, cancel := context.WithCancel(ctx)
			call := acquireAsync(wctx, b, n)
			ok, decided, want := m.admit(now, n, cfg.queue)
			trace = append(trace, fmt.Sprintf("acquire(%d)", n))
			if ok || want != nil {
				p, err := call.wait(t)
				cancel()
				settle(decided)
				if ok {
					if err != nil {
						fail("Acquire(%d): %v, want a permit", n, err)
					}
					issued(p, n, m.limit, now)
				} else {
					refused("Acquire", n, err, want)
				}
				break
			}
			w := &bhWaiter{weight: n, deadline: now.Add(maxWait), cancel: cancel, call: call}
			m.queue = append(m.queue, w)
			eventually(t, "the Acquire to queue", func() bool { return b.QueueDepth() == len(m.queue) || call.returned() })
			if call.returned() {
				_, err := call.wait(t)
				fail("Acquire(%d) returned %v, want it queued", n, err)
			}
			settle(decided)
		case op < 15: // Release
			if len(held) == 0 {
				break
			}
			i := r.IntN(len(held))
			p := held[i]
			held = append(held[:i], held[i+1:]...)
			trace = append(trace, fmt.Sprintf("release(%d)", p.ID()))
			if err := b.Release(p); err != nil {
				fail("Release(%d): %v", p.ID(), err)
			}
			released = append(released, p)
			m.release(p.Weight())
			_, decided := m.dispatch(now, nil)
			settle(decided)
		case op < 16: // release again, or the zero Permit
			p := bulkhead.Permit{}
			if len(released) > 0 {
				p = released[r.IntN(len(released))]
			}
			trace = append(trace, fmt.Sprintf("re-release(%d)", p.ID()))
			if err := b.Release(p); !errors.Is(err, bulkhead.ErrUnknownPermit) {
				fail("second Release(%d): %v, want ErrUnknownPermit", p.ID(), err)
			}
		case op < 17: // a waiter gives up
			if len(m.queue) == 0 {
				break
			}
			w := m.queue[r.IntN(len(m.queue))]
			trace = append(trace, fmt.Sprintf("cancel(%d)", w.weight))
			m.remove(w)
			w.decided, w.err = true, context.Canceled
			w.cancel()
			_, decided := m.dispatch(now, []*bhWaiter{w})
			settle(decided)
		case op < 18: // SetLimit
			n := 1 + r.IntN(6)
			trace = append(trace, fmt.Sprintf("limit(%d)", n))
			if err := b.SetLimit(n); err != nil {
				fail("SetLimit(%d): %v", n, err)
			}
			m.setLimit(n)
			_, decided := m.dispatch(now, nil)
			settle(decided)
		default: // time passes: short of the maximum wait, or past it
			d := time.Duration(r.IntN(4)) * maxWait / 4
			if r.IntN(3) == 0 {
				d = maxWait
			}
			trace = append(trace, fmt.Sprintf("+%v", d))
			clk.Advance(d)
			// Each timed-out waiter's timer times it out and serves those
			// behind it.
			_, decided := m.dispatch(clk.Now(), nil)
			settle(decided)
		}

		if got, want := b.InFlight(), m.used; got != want {
			fail("InFlight() = %d, model %d", got, want)
		}
		if got, want := b.Limit(), m.limit; got != want {
			fail("Limit() = %d, model %d", got, want)
		}
		if got, want := b.QueueDepth(), len(m.queue); got != want {
			fail("QueueDepth() = %d, model %d", got, want)
		}
		if got, want := b.Draining(), m.draining; got != want {
			fail("Draining() = %v, model %v", got, want)
		}
		if got, want := b.Available(), max(m.limit-m.used, 0); got != want {
			fail("Available() = %d, model %d", got, want)
		}
		if err := b.CheckInvariants(); err != nil {
			fail("%v", err)
		}
	}

	// Wind down: the waiters give up, the permits go back.
	for len(m.queue) > 0 {
		w := m.queue[0]
		m.remove(w)
		w.decided, w.err = true, context.Canceled
		w.cancel()
		_, decided := m.dispatch(clk.Now(), []*bhWaiter{w})
		settle(decided)
	}
	for _, p := range held {
		release(t, b, p)
	}
	if b.InFlight() != 0 || b.QueueDepth() != 0 {
		t.Fatalf("at the end: %d in flight, %d queued", b.InFlight(), b.QueueDepth())
	}
	if err := b.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}
