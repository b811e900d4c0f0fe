package bulkhead

import (
	"fmt"
	"reflect"
	"strconv"
	"time"

	"github.com/groupexec/groupexec/clock"
	"github.com/groupexec/groupexec/internal/typednil"
)

// DefaultLatencyWindow is how many of the latest latency samples P99 reads
// by default, and the least WithLatencyWindow accepts.
const DefaultLatencyWindow = 1024

// MaxLatencyWindow is the most samples WithLatencyWindow accepts (262,144:
// 2 MiB). Every P99 call copies the whole window, under the lock that each
// recorded latency takes, and sorts the copy; the bound keeps that copy
// well under a millisecond and the sort to a few milliseconds.
const MaxLatencyWindow = 1 << 18

// MaxEventLog is the most events WithEventLog keeps (65,536: about 6 MiB).
// Events copies the whole log under the bulkhead's lock, which queued
// acquires and releases also take; the bound keeps that copy to about a
// millisecond.
const MaxEventLog = 1 << 16

// An Option configures a Bulkhead. Invalid values make New fail with a
// *ConfigError naming the option and value. Options are applied in order,
// and one given twice takes its later value, except WithListener and
// WithRequiredCapability, whose second would drop what the first asked
// for without a word: New refuses it.
type Option interface {
	apply(*Bulkhead) error
}

type optionFunc func(*Bulkhead) error

func (f optionFunc) apply(b *Bulkhead) error { return f(b) }

// WithQueue lets Acquire and Submit wait, in FIFO order, when every permit is
// out: up to depth requests wait, each for at most maxWait (then
// ErrQueueTimeout); a request beyond depth fails with ErrQueueSaturated.
// A waiter whose context ends leaves the queue when its goroutine next runs
// (or when a permit that comes free reaches it first); until then it counts
// toward depth.
// depth and maxWait must be positive; a caller's context can end a wait
// sooner. Default: no queue, so at capacity fails at once (ErrAtCapacity).
func WithQueue(depth int, maxWait time.Duration) Option {
	return optionFunc(func(b *Bulkhead) error {
		if depth < 1 {
			return &ConfigError{"WithQueue depth", depth, "must be >= 1"}
		}
		if maxWait <= 0 {
			return &ConfigError{"WithQueue maxWait", maxWait, "must be > 0"}
		}
		b.maxDepth, b.maxWait = depth, maxWait
		return nil
	})
}

// WithRequiredCapability makes every acquire require a context carrying the
// named capability (see WithCapability); one without it fails at once with
// ErrCapabilityRequired and changes nothing. A bulkhead requires one
// capability: a second WithRequiredCapability with another name is
// invalid, since taking it in place of the first would drop a requirement
// without a word.
func WithRequiredCapability(name string) Option {
	return optionFunc(func(b *Bulkhead) error {
		if name == "" {
			return &ConfigError{"WithRequiredCapability name", `""`, "must not be empty"}
		}
		if b.capability != "" && b.capability != name {
			return &ConfigError{"WithRequiredCapability name", name, "given twice: a bulkhead requires one capability, and " + strconv.Quote(b.capability) + " was required first"}
		}
		b.capability = name
		return nil
	})
}

// WithLatencyTarget sets the p99 latency WithinTarget compares against.
// Default: none, and WithinTarget is always true.
func WithLatencyTarget(d time.Duration) Option {
	return optionFunc(func(b *Bulkhead) error {
		if d <= 0 {
			return &ConfigError{"WithLatencyTarget", d, "must be > 0"}
		}
		b.target = d
		return nil
	})
}

// WithLatencyWindow sets how many of the latest latency samples P99 reads;
// n must be in [DefaultLatencyWindow, MaxLatencyWindow].
func WithLatencyWindow(n int) Option {
	return optionFunc(func(b *Bulkhead) error {
		if n < DefaultLatencyWindow || n > MaxLatencyWindow {
			return &ConfigError{"WithLatencyWindow", n, "must be in [DefaultLatencyWindow, MaxLatencyWindow]"}
		}
		b.latency.buf = make([]time.Duration, n)
		return nil
	})
}

// WithEventLog keeps the last n events for Events; n must be in
// [1, MaxEventLog]. Default: none kept.
func WithEventLog(n int) Option {
	return optionFunc(func(b *Bulkhead) error {
		if n < 1 || n > MaxEventLog {
			return &ConfigError{"WithEventLog", n, "must be in [1, MaxEventLog]"}
		}
		b.ring = &eventRing{buf: make([]Event, n)}
		return nil
	})
}

// WithListener sets the Listener that observes every event. l must not be
// nil, nor a nil pointer or nil function in a Listener (nor among those
// Listeners combines): either would fail on every event, and the failure,
// recovered, would go unseen. It may be given once: a second would replace
// the first, a metrics exporter's say, without a word; pass several
// listeners to one WithListener with Listeners.
func WithListener(l Listener) Option {
	return optionFunc(func(b *Bulkhead) error {
		if b.listener != nil {
			return &ConfigError{"WithListener", l, "given twice: it would replace the first listener; combine them with Listeners"}
		}
		if isNilListener(l) {
			return &ConfigError{"WithListener", l, "must not be nil"}
		}
		if m, ok := l.(*listenerList); ok {
			for _, one := range m.ls {
				if isNilListener(one) {
					return &ConfigError{"WithListener", one, "a listener given to Listeners must not be a nil pointer or function"}
				}
			}
		}
		b.listener = l
		return nil
	})
}

// isNilListener reports whether l is nil or holds a nil pointer or function.
// A nil map, slice or channel is left alone: its methods may work.
func isNilListener(l Listener) bool {
	if l == nil {
		return true
	}
	if f, ok := l.(ListenerFunc); ok {
		return f == nil // the common case, without reflection
	}
	switch v := reflect.ValueOf(l); v.Kind() {
	case reflect.Pointer, reflect.Func, reflect.UnsafePointer:
		return v.IsNil()
	}
	return false
}

// WithClock sets the clock for queue waits, permit and event times and
// Submit's latencies. Tests pass a *clock.Fake. c must not be nil, nor hold
// a nil pointer (a nil *clock.Fake), function, map, slice or channel, whose
// Now would panic (or block for good). Default: clock.Real.
//
// The clock is user code: the bulkhead calls it holding nothing (it reads
// the clock before it takes its mutex, and a waiter arms and stops its own
// timer), so that no panic or runtime.Goexit in it leaves the mutex held.
// A Now that panics reads as the latest time it gave: to the bulkhead, time
// stands still until it answers again (no call finds a waiter past its
// maximum wait; a waiter's timer that the clock fires meanwhile still times
// it out, as the clock says its maximum wait has passed). A clock set back
// reads the same way, as the latest time it gave, until it catches up:
// event and permit times never go back, and a latency the clock would make
// negative (a run it saw end before it began) counts as 0. A waiter whose
// timer AfterFunc fails to arm times out when a later call finds it past
// its maximum wait; a Stop that panics counts as done. Submit's goroutine
// times each run: a run whose timing Now panics records no latency. New
// and a lock-free TryAcquire read the clock with no recover: a panic there
// goes on up to their caller.
//
// A method that exits its goroutine (runtime.Goexit, which cannot be
// stopped) ends the call it was made for, and leaves the bulkhead whole:
// an acquire, a refusal or a SetLimit is not made; a Release, a waiter
// leaving the queue or timing out, and the serving of waiters after a
// release are done all the same, at the latest time read, as the
// goroutine exits (the listener does not hear their events; the event log
// keeps them); a queued Acquire whose AfterFunc or Stop exits ends as one
// whose context does (its place or its permit goes back); and a Submit
// whose run's Now exits fails with ErrGoexit without running its
// function.
func WithClock(c clock.Clock) Option {
	return optionFunc(func(b *Bulkhead) error {
		if c == nil {
			return &ConfigError{"WithClock", nil, "must not be nil"}
		}
		if typednil.Is(c) {
			return &ConfigError{"WithClock", fmt.Sprintf("%T(nil)", c), "must not be a nil pointer, function, map, slice or channel"}
		}
		b.clk = c
		return nil
	})
}
