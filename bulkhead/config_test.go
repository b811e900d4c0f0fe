package bulkhead_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/groupexec/groupexec/bulkhead"
	"github.com/groupexec/groupexec/clock"
	"github.com/groupexec/groupexec/internal/clocktest"
)

func TestInvalidConfig(t *testing.T) {
	tests := []struct {
		name   string
		limit  int
		opts   []bulkhead.Option
		option string
	}{
		{"zero limit", 0, nil, "New limit"},
		{"negative limit", -3, nil, "New limit"},
		{"queue depth", 1, []bulkhead.Option{bulkhead.WithQueue(0, time.Second)}, "WithQueue depth"},
		{"queue wait", 1, []bulkhead.Option{bulkhead.WithQueue(1, 0)}, "WithQueue maxWait"},
		{"capability", 1, []bulkhead.Option{bulkhead.WithRequiredCapability("")}, "WithRequiredCapability name"},
		{"target", 1, []bulkhead.Option{bulkhead.WithLatencyTarget(-time.Second)}, "WithLatencyTarget"},
		{"window", 1, []bulkhead.Option{bulkhead.WithLatencyWindow(100)}, "WithLatencyWindow"},
		{"window above max", 1, []bulkhead.Option{bulkhead.WithLatencyWindow(bulkhead.MaxLatencyWindow + 1)}, "WithLatencyWindow"},
		{"huge window", 1, []bulkhead.Option{bulkhead.WithLatencyWindow(math.MaxInt)}, "WithLatencyWindow"},
		{"event log", 1, []bulkhead.Option{bulkhead.WithEventLog(0)}, "WithEventLog"},
		{"event log above max", 1, []bulkhead.Option{bulkhead.WithEventLog(bulkhead.MaxEventLog + 1)}, "WithEventLog"},
		{"huge event log", 1, []bulkhead.Option{bulkhead.WithEventLog(math.MaxInt)}, "WithEventLog"},
		{"listener", 1, []bulkhead.Option{bulkhead.WithListener(nil)}, "WithListener"},
		{"clock", 1, []bulkhead.Option{bulkhead.WithClock(nil)}, "WithClock"},
		{"nil clock pointer", 1, []bulkhead.Option{bulkhead.WithClock((*clock.Fake)(nil))}, "WithClock"},
		{"nil clock func", 1, []bulkhead.Option{bulkhead.WithClock(clocktest.Func(nil))}, "WithClock"},
		{"nil clock map", 1, []bulkhead.Option{bulkhead.WithClock(clocktest.Map(nil))}, "WithClock"},
		{"nil clock slice", 1, []bulkhead.Option{bulkhead.WithClock(clocktest.Slice(nil))}, "WithClock"},
		{"nil clock chan", 1, []bulkhead.Option{bulkhead.WithClock(clocktest.Chan(nil))}, "WithClock"},
		{"nil listener func", 1, []bulkhead.Option{bulkhead.WithListener(bulkhead.ListenerFunc(nil))}, "WithListener"},
		{"nil listener pointer", 1, []bulkhead.Option{bulkhead.WithListener((*countingListener)(nil))}, "WithListener"},
		{"nil listener of a func type", 1, []bulkhead.Option{bulkhead.WithListener(eventFunc(nil))}, "WithListener"},
		{"nil option", 1, []bulkhead.Option{bulkhead.WithQueue(1, time.Second), nil}, "New option"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var b *bulkhead.Bulkhead
			var err error
			func() {
				defer func() {
					if r := recover(); r != nil {
						err = fmt.Errorf("panic: %v", r)
					}
				}()
				b, err = bulkhead.New(tc.limit, tc.opts...)
			}()
			if b != nil {
				t.Fatal("New returned a bulkhead with an error")
			}
			wantErr(t, err, bulkhead.ErrInvalidConfig)
			var ce *bulkhead.ConfigError
			if !errors.As(err, &ce) || ce.Option != tc.option || !strings.Contains(err.Error(), tc.option) {
				t.Fatalf("error %v does not name %q", err, tc.option)
			}
		})
	}
}

// countingListener and eventFunc are listeners of types other than
// ListenerFunc, whose nil values a program may pass by mistake.
type countingListener struct{ n int }

func (l *countingListener) OnEvent(bulkhead.Event) { l.n++ }

type eventFunc func(bulkhead.Event)

func (f eventFunc) OnEvent(e bulkhead.Event) { f(e) }

// The same kinds, not nil, are clocks like any other.
func TestWithClockOfEveryKindAccepted(t *testing.T) {
	for _, c := range clocktest.At(t0) {
		b := newBH(t, 1, bulkhead.WithClock(c))
		if p := acquire(t, b, 1); !p.IssuedAt().Equal(t0) {
			t.Errorf("%T: IssuedAt %v, want %v", c, p.IssuedAt(), t0)
		}
	}
}

func TestLargestWindowAndEventLogAccepted(t *testing.T) {
	b := newBH(t, 1, bulkhead.WithLatencyWindow(bulkhead.MaxLatencyWindow), bulkhead.WithEventLog(bulkhead.MaxEventLog))
	b.RecordLatency(time.Millisecond)
	if p, ok := b.P99(); !ok || p != time.Millisecond {
		t.Fatalf("P99 = %v, %v; want 1ms, true", p, ok)
	}
	if n := len(b.Events()); n != 1 {
		t.Fatalf("%d events kept, want 1", n)
	}
}

func TestInvalidArguments(t *testing.T) {
	b := newBH(t, 2, bulkhead.WithQueue(1, time.Second))
	before := stateOf(b)
	for name, err := range map[string]error{
		"SetLimit 0":   b.SetLimit(0),
		"TryAcquire 0": func() error { _, err := b.TryAcquire(bg, 0); return err }(),
		"Acquire -1":   func() error { _, err := b.Acquire(bg, -1); return err }(),
		"Submit nil":   func() error { _, err := bulkhead.Submit[int](b, bg, nil); return err }(),
	} {
		if !errors.Is(err, bulkhead.ErrInvalidConfig) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if got := stateOf(b); got != before {
		t.Fatalf("invalid calls changed the state from %+v to %+v", before, got)
	}
	// More than the limit can never be issued: refused at once, not queued.
	_, err := b.Acquire(bg, 3)
	wantErr(t, err, bulkhead.ErrAtCapacity)
}

func TestCodesAreStable(t *testing.T) {
	for err, code := range map[*bulkhead.Error]string{
		bulkhead.ErrCapabilityRequired: "RB_ERR_NO_REMOTECAP",
		bulkhead.ErrAtCapacity:         "RB_ERR_AT_CAPACITY",
		bulkhead.ErrQueueSaturated:     "RB_ERR_QUEUE_SATURATED",
		bulkhead.ErrQueueTimeout:       "RB_ERR_QUEUE_TIMEOUT",
		bulkhead.ErrUnknownPermit:      "RB_ERR_UNKNOWN_PERMIT",
		bulkhead.ErrDraining:           "RB_ERR_DRAINING",
		bulkhead.ErrInvalidConfig:      "RB_ERR_INVALID_CONFIG",
		bulkhead.ErrGoexit:             "RB_ERR_GOEXIT", // metrics label rejections with it
	} {
		if err.Code() != code {
			t.Errorf("%v has code %s, want %s", err, err.Code(), code)
		}
	}
}

// SetLimit raising admits waiters before it returns.
func TestRaisingAdmitsWaitersAtOnce(t *testing.T) {
	b := newBH(t, 1, bulkhead.WithQueue(8, time.Hour))
	held := acquire(t, b, 1)
	q := queueWith(t, bg, b, 3)
	if err := b.SetLimit(3); err != nil {
		t.Fatal(err)
	}
	if b.QueueDepth() != 1 || b.InFlight() != 3 {
		t.Fatalf("after raising to 3: %+v", stateOf(b))
	}
	for _, r := range q[:2] {
		p, err := r.wait(t)
		if err != nil || p.Limit() != 3 {
			t.Fatalf("admitted waiter: %v limit %d", err, p.Limit())
		}
		release(t, b, p)
	}
	p, _ := q[2].wait(t)
	release(t, b, p)
	release(t, b, held)
}

// IssuedAt with the real clock is a coarse reading: never later than the
// acquire returned, and never earlier than the coarse clock read before the
// acquire started (its readings never go backwards). How stale the coarse
// clock may be against the wall clock has no bound a test can rely on: a
// process stopped for a while (a loaded machine, a CPU quota) finds its
// refresh timer late, so that is checked only as an eventual property, and
// internal/coarse checks its refreshes exactly with a fake clock.
func TestIssuedAtRealClock(t *testing.T) {
	b := newBH(t, 4)
	if _, coarse := b.StampNow(); !coarse {
		t.Fatal("a bulkhead with the real clock and no observer stamps permits with the exact clock")
	}
	for range 1000 {
		before, _ := b.StampNow()
		p := acquire(t, b, 1)
		after := time.Now()
		at := p.IssuedAt()
		if at.After(after) || at.Before(before) {
			t.Fatalf("IssuedAt %v outside [%v, %v]", at, before, after)
		}
		release(t, b, p)
	}
	// Left unread for a few refresh periods, the coarse clock goes idle, and
	// its next reading is exact: a permit issued then is stamped no earlier
	// than the wall clock read before its acquire. A clock that stopped
	// refreshing, or a stamp from anything but the clock, never gets there.
	deadline := time.Now().Add(30 * time.Second)
	for {
		time.Sleep(5 * time.Millisecond)
		before := time.Now()
		p := acquire(t, b, 1)
		at := p.IssuedAt()
		release(t, b, p)
		if !at.Before(before) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("IssuedAt %v still before the acquire began, %v, after the clock was left idle", at, before)
		}
	}
	if !(bulkhead.Permit{}).IssuedAt().IsZero() {
		t.Fatal("zero permit has an issue time")
	}
}

func TestIssuedAtFakeClockIsExact(t *testing.T) {
	clk := &fakeNow{now: t0}
	b := newBH(t, 1, bulkhead.WithClock(clk))
	clk.now = t0.Add(1234 * time.Microsecond)
	p := acquire(t, b, 1)
	if !p.IssuedAt().Equal(clk.now) {
		t.Fatalf("IssuedAt %v, want %v", p.IssuedAt(), clk.now)
	}
}

// A nil context is an invalid argument wherever a context is waited on or
// handed to fn: Submit refuses it before taking a permit (so none is lost
// to a panic after the grant), Acquire with a queue refuses it rather than
// panic, and Wait refuses it rather than panic. The bulkhead's state is
// unchanged.
func TestNilContextIsInvalid(t *testing.T) {
	for _, queued := range []bool{false, true} {
		var opts []bulkhead.Option
		if queued {
			opts = append(opts, bulkhead.WithQueue(1, time.Second))
		}
		b := newBH(t, 2, opts...)
		before := stateOf(b)
		call := func(name string, f func() error) {
			t.Helper()
			var err error
			func() {
				defer func() {
					if r := recover(); r != nil {
						err = fmt.Errorf("panic: %v", r)
					}
				}()
				err = f()
			}()
			var ce *bulkhead.ConfigError
			if !errors.As(err, &ce) || !strings.Contains(err.Error(), "ctx") {
				t.Errorf("queue %v: %s: %v; want a *ConfigError naming ctx", queued, name, err)
			}
			if got := stateOf(b); got != before {
				t.Errorf("queue %v: %s changed the state from %+v to %+v", queued, name, before, got)
			}
		}
		var none context.Context // nil: the input under test
		call("Submit", func() error {
			_, err := bulkhead.Submit(b, none, func(context.Context) (int, error) { return 1, nil })
			return err
		})
		if queued {
			call("Acquire", func() error { _, err := b.Acquire(none, 1); return err })
		}
		h, err := bulkhead.Submit(b, bg, func(context.Context) (int, error) { return 1, nil })
		if err != nil {
			t.Fatal(err)
		}
		<-h.Done()
		call("Wait", func() error { _, err := h.Wait(none); return err })
	}
}
