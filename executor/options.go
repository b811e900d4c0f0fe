package executor

import (
	"fmt"
	"reflect"

	"github.com/groupexec/groupexec/breaker"
	"github.com/groupexec/groupexec/clock"
	"github.com/groupexec/groupexec/internal/typednil"
)

// DefaultMaxIdleGroups is how many idle groups keep their state by default.
const DefaultMaxIdleGroups = 1024

// An Option configures an Executor.
type Option interface {
	apply(*Executor) error
}

type optionFunc func(*Executor) error

func (f optionFunc) apply(ex *Executor) error { return f(ex) }

// WithListener sets the Listener that observes every task; nil means none.
// A WithListener after one that set a listener makes New fail, naming it,
// since it would silently replace the first (a metrics collector's, say);
// after WithListener(nil) it is taken, as it replaces nothing. To attach
// several listeners, pass Listeners(a, b, ...).
// A Listener holding a nil pointer or function, itself or among those
// Listeners combines, is refused: it would fail at every event, and a
// listener's failures are recovered without a word.
func WithListener(l Listener) Option {
	return optionFunc(func(ex *Executor) error {
		if ex.listener != nil {
			return fmt.Errorf("executor: WithListener(%T) given twice: it would replace the first listener, %T; pass several to one WithListener with executor.Listeners", l, ex.listener)
		}
		if m, ok := l.(*listenerList); ok {
			for i, l := range m.ls {
				if nilValue(l) {
					return fmt.Errorf("executor: WithListener(Listeners(...)): listener %d, (%T)(nil), must not be a nil pointer or function", i, l)
				}
			}
		} else if nilValue(l) {
			return fmt.Errorf("executor: WithListener((%T)(nil)): the listener must not be a nil pointer or function", l)
		}
		ex.listener = l
		return nil
	})
}

// nilValue reports whether l, not nil itself, holds a nil pointer or
// function.
func nilValue(l Listener) bool {
	if l == nil {
		return false
	}
	switch v := reflect.ValueOf(l); v.Kind() {
	case reflect.Pointer, reflect.Func:
		return v.IsNil()
	}
	return false
}

// WithRejectionHandler sets the handler called, instead of the policy's
// rejection default, for tasks refused for lack of room.
func WithRejectionHandler(h RejectionHandler) Option {
	return optionFunc(func(ex *Executor) error { ex.handler = h; return nil })
}

// WithClock sets the clock used for queue timeouts and task timings, and by
// the group breakers (WithGroupBreaker) whose Settings.Clock is nil, in
// whichever order the two options come. Tests pass a *clock.Fake. Default:
// clock.Real.
//
// The executor reads the clock, and arms and stops its timers, under its
// locks: the clock's methods must not call the executor (GroupStats, say,
// would wait for a lock its caller holds), nor call runtime.Goexit (which
// no recover stops: the lock would stay held, and the group, or every
// group, stop for good), and a panic in them is recovered there, so that
// no lock stays held. A Now that panics reads as the latest time it gave:
// to the executor, time stands still (waits and run times stop growing,
// no queue timeout expires) until it answers again. A timer that
// AfterFunc fails to arm leaves the queue timeout of its group's head to
// be enforced when the head would start; a Stop that panics counts as
// done. New reads the clock once, with no lock held: a panic there goes
// on up New's caller. A group breaker that reads the clock is the
// breaker's own (WithGroupBreaker): a panic as it admits a task refuses
// the task and goes on up to Submit's, Go's or Do's caller; as it records
// an outcome, it is recovered and ignored. A clock holding a nil pointer
// (a nil *clock.Fake), function, map, slice or channel is refused, as nil
// is: its Now would panic (or block) in New, or read the zero time.
func WithClock(c clock.Clock) Option {
	return optionFunc(func(ex *Executor) error {
		if c == nil {
			return fmt.Errorf("executor: WithClock(nil): the clock must not be nil")
		}
		if typednil.Is(c) {
			return fmt.Errorf("executor: WithClock((%T)(nil)): the clock must not be a nil pointer, function, map, slice or channel", c)
		}
		ex.clk = c
		return nil
	})
}

// WithMaxIdleGroups bounds how many idle groups (no task waiting or running)
// keep their state, limits and counters. Past n, the group idle the longest
// is reclaimed, with two approximations that keep going idle free of
// shared writes while the executor keeps no more than n groups: the groups
// that went idle then are ordered among themselves by their place in the
// executor's index, not by when they went idle (they all go before any
// group that goes idle after); and a group counts as idle from when it
// goes idle until a trim finds it busy, so that fewer than n idle groups
// may be kept for a while, never more. A reclaimed group's limits are
// resolved afresh when it is next used (limits
// given by SetGroupLimits are kept until ResetGroupLimits), and its breaker
// (WithGroupBreaker) is made afresh, closed. Groups whose breakers are open
// or half-open are passed over for those whose breakers are closed, up to
// 8 of them at a time, so that a client sending work for n new groups does
// not reset the breaker of a group gone idle; past that, they are reclaimed
// too. n must be >= 0;
// 0 reclaims a group as soon as it goes idle. Groups shut down with
// ShutdownGroup are kept until evicted. Default: DefaultMaxIdleGroups.
func WithMaxIdleGroups(n int) Option {
	return optionFunc(func(ex *Executor) error {
		if n < 0 {
			return fmt.Errorf("executor: WithMaxIdleGroups(%d): must be >= 0", n)
		}
		ex.maxIdle = n
		return nil
	})
}

// WithSpawn sets how the executor starts a worker goroutine: spawn must run
// f exactly once, on another goroutine, and never drop it. A worker runs
// tasks back to back while its group or others have startable work, so
// spawn is called far less often than once per task. Default: go f().
// If spawn panics, the executor recovers and starts f itself unless spawn
// had started it, so no task is lost or run twice; a spawn that drops f
// without panicking breaks this contract and strands the task. So does,
// in part, a spawn that exits its goroutine (runtime.Goexit): f is started
// as after a panic, but the exit cannot be stopped, and the tasks that the
// same call (a finish, a dispatch) was to start after f's may be stranded.
// spawn must return.
// benchmarks/ measures an ants pool here against the default.
func WithSpawn(spawn func(f func())) Option {
	return optionFunc(func(ex *Executor) error {
		if spawn == nil {
			return fmt.Errorf("executor: WithSpawn(nil): the spawn function must not be nil")
		}
		ex.spawn = spawn
		return nil
	})
}

// WithGroupBreaker gives every group its own circuit breaker, made from s
// when the group's state is created. The breaker's name is the group key
// (prefixed by s.Name and a colon when s.Name is set), so one OnStateChange
// can tell groups apart. A nil s.Clock means the executor's clock
// (WithClock, whichever option comes first), so that a fake clock given to
// the executor times the breakers too. A breaker reads its clock itself,
// not through the executor's recovery: a Now that panics as a task is
// admitted counts the task Rejected and goes on up its caller; as a
// task's outcome is recorded, it is recovered and ignored.
//
// A group whose breaker refuses (open, or half-open with its probes in
// flight) has new tasks rejected at once, whatever the rejection policy:
// they complete Rejected with an error matching both ErrRejected and
// breaker.ErrOpenState (or breaker.ErrTooManyRequests), and are never queued,
// so a failing tenant stops taking capacity. The breaker is asked as a task is
// admitted, and looked at again as the task would start, at once (another
// of the group's tasks may have opened it meanwhile) or after waiting in
// the group's queue: if it is open then, or half-open and the task is not
// one of its probes, the task is refused in the same way (Rejected, its Submit
// handle completed, its Do call returning the error, the listener told
// OnRejected) and never runs, so that the rest of a batch sent to a
// failing host is not sent after it. That look only reads the breaker's
// state: an open breaker whose Timeout has passed refuses queued tasks
// until a new task is admitted as its probe. A finished task's outcome is
// recorded in its group's breaker before its handle completes: Failed counts
// as a failure, Success as a success; Cancelled and Rejected tasks count as
// neither. The task's status decides: s.IsSuccessful, which only the
// breaker's Execute consults, is never called. The breaker is dropped with its group, on EvictGroup or by idle
// reclamation (WithMaxIdleGroups), whatever its state: a group made again
// for its key has a closed breaker. A failing tenant is idle by
// construction, so its group counts among the idle groups kept, and each
// refusal makes it the most recently idle: it may be reclaimed once
// WithMaxIdleGroups other groups have gone idle since its tenant last
// called, after the groups with closed breakers behind at most 8 tripped
// ones idle the longest (see WithMaxIdleGroups). So memory stays bounded however many
// tenants trip their breakers and go away, and a tenant that keeps calling
// keeps its breaker, unless WithMaxIdleGroups is 0: then a breaker lasts
// only while its group has tasks. OnStateChange runs outside every
// executor lock. A panic in
// ReadyToTrip, called as a task's failure is recorded, is recovered and
// ignored: the failure is counted, the breaker does not trip, and the task
// completes Failed as it would have. The breaker recovers a panic in
// OnStateChange; one that exits the goroutine (runtime.Goexit) as a task
// is admitted, a half-open breaker's first request, leaves that task
// counted Rejected, its Submit, Do or Go call unreturned, and tells the
// listener OnRejected with a *RejectedError (LimitBreaker) matching
// ErrGoexit. A ReadyToTrip or
// OnStateChange that exits the goroutine as a task's outcome is recorded
// ends the goroutine that ran the task (a worker, or a Do call's caller);
// the task still releases its permits and completes as it would have.
//
// Invalid settings make New return the breaker's error naming the field.
func WithGroupBreaker(s breaker.Settings) Option {
	return optionFunc(func(ex *Executor) error {
		if _, err := breaker.New(s); err != nil {
			return fmt.Errorf("executor: WithGroupBreaker: %w", err)
		}
		ex.breaker = &s
		return nil
	})
}
