package bulkhead

import (
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/groupexec/groupexec/clock"
	"github.com/groupexec/groupexec/internal/coarse"
	"github.com/groupexec/groupexec/internal/groupsem"
	"github.com/groupexec/groupexec/internal/queue"
)

// coarseResolution is how stale a permit's IssuedAt may be with the real
// clock (twice this, at most, plus timer lateness).
const coarseResolution = time.Millisecond

// Bulkhead bounds the operations in flight. It is safe for concurrent use.
// Its zero value is not usable: make one with New.
type Bulkhead struct {
	// The lock-free fast path's words (state.go), on one cache line.
	hot *hotLine

	refused atomic.Pointer[RejectedError] // the last lock-free refusal, shared while its numbers hold (refuseFull)

	mu           sync.Mutex
	sem          groupsem.Sem // the limit and drain state; its count observes state's
	converted    permitTable  // permits out whose frontier was moved past them
	waiters      queue.List[*waiter]
	servedAt     int // the count at which the queue was last served (dispatchLocked), for CheckInvariants
	slowIssues   int // permits issued under mu, for tests
	conversions  int // permits converted, for tests
	slowReleases int // releases decided under mu, for tests

	// Fixed by New.
	plain      bool // no capability, listener or event log: the fast paths apply
	observed   bool // a listener or an event log wants events
	capability string
	maxDepth   int
	maxWait    time.Duration
	clk        clock.Clock
	realClk    bool          // clk is clock.Real, which never panics: read without a recover
	coarse     *coarse.Clock // stamps permits when clk is the real clock and nothing is observed
	base       time.Time     // stamps are nanoseconds after base, unless coarse
	latest     atomic.Int64  // the latest stamp read from clk, unless coarse (advance)
	now        int64         // a clock given to WithClock: the stamp of what is done under mu (lockNow)
	target     time.Duration
	ring       *eventRing
	listener   Listener

	latency latencyWindow
}

// New returns a bulkhead that lets at most limit permits be out at once.
// A limit outside [1, MaxLimit] or an invalid option is a *ConfigError (ErrInvalidConfig).
func New(limit int, opts ...Option) (*Bulkhead, error) {
	if limit < 1 || limit > MaxLimit {
		return nil, &ConfigError{"New limit", limit, "must be in [1, MaxLimit]"}
	}
	b := &Bulkhead{sem: groupsem.New(limit), clk: clock.Real, hot: newHotLine()}
	b.hot.limit.Store(int64(limit))
	for _, o := range opts {
		if o == nil {
			return nil, &ConfigError{"New option", nil, "must not be nil"}
		}
		if err := o.apply(b); err != nil {
			return nil, err
		}
	}
	if b.latency.buf == nil {
		b.latency.buf = make([]time.Duration, DefaultLatencyWindow)
	}
	b.observed = b.listener != nil || b.ring != nil
	b.plain = !b.observed && b.capability == ""
	b.realClk = b.clk == clock.Real
	if b.realClk && !b.observed {
		b.coarse = coarse.New(b.clk, coarseResolution)
	} else {
		b.base = b.clk.Now()
	}
	return b, nil
}

// stamp reads the clock for a permit or an event. Under the mutex. The
// real clock, which never panics nor exits the goroutine, is read there;
// a clock given to WithClock was read before the mutex was taken
// (lockNow), and stamp is that reading.
func (b *Bulkhead) stamp() int64 {
	if b.coarse != nil {
		return b.coarse.Offset()
	}
	if b.realClk {
		return int64(b.clk.Now().Sub(b.base))
	}
	return b.now
}

// exactStamp reads the clock for a permit on the lock-free fast path, where
// a panic in the clock holds nothing and goes on up to the caller.
func (b *Bulkhead) exactStamp() int64 { return b.advance(int64(b.clk.Now().Sub(b.base))) }

// advance returns the later of stamp, a reading of the clock, and the
// latest reading before it, and keeps it as the latest. A clock given to
// WithClock may be set back (a test's, or a wall clock stepped by hand):
// taken as it is, it would log an event before the one that caused it, date
// a permit before one issued earlier, and time a waiter's maximum wait from
// the earlier time. So to the bulkhead, time stands still until the clock
// catches up. (The real clock's monotonic reading never goes back.)
func (b *Bulkhead) advance(stamp int64) int64 {
	for {
		latest := b.latest.Load()
		if stamp <= latest {
			return latest
		}
		if b.latest.CompareAndSwap(latest, stamp) {
			return stamp
		}
	}
}

// nowLocked is stamp as a time. Under the mutex.
func (b *Bulkhead) nowLocked() time.Time {
	if b.realClk {
		return b.clk.Now()
	}
	return b.at(b.now)
}

// read reads a clock given to WithClock for an operation about to take the
// mutex, holding nothing, and returns the reading as a stamp, for lockNow
// to advance under the mutex. A clock given to WithClock is user code: read
// under the mutex, a panic going on up from it would leave the mutex held,
// and every later call blocked for good, and so would runtime.Goexit,
// which cannot be stopped. A Now that panics reads as the latest reading:
// to the bulkhead, time stands still while Now panics, as while it reads
// earlier than before (advance). One that exits the goroutine does so
// holding nothing (lockNow).
func (b *Bulkhead) read() (stamp int64) {
	defer func() {
		if recover() != nil {
			stamp = b.latest.Load()
		}
	}()
	return int64(b.clk.Now().Sub(b.base))
}

// lockNow is lock for an operation that stamps what it does (stamp,
// nowLocked): it reads a clock given to WithClock first (read), outside
// the mutex. If Now exits the goroutine (runtime.Goexit), the goroutine
// exits holding nothing, the operation not begun, unless finish is not
// nil: finish is the operation under the mutex, which must not be left
// undone (a release, a waiter leaving the queue or timing out, waiters
// served after a release), and it runs as the goroutine exits, under the
// mutex and at the latest reading, as if Now had panicked. (The listener
// does not hear its events; the event log keeps them.)
func (b *Bulkhead) lockNow(finish func()) {
	if b.realClk {
		b.lock()
		return
	}
	stamped := false
	if finish != nil {
		defer func() {
			if !stamped {
				b.lock()
				b.now = b.latest.Load()
				finish()
				b.unlock()
			}
		}()
	}
	stamp := b.read()
	stamped = true
	b.lock()
	b.now = b.advance(stamp)
}

// at turns a stamp back into a time.
func (b *Bulkhead) at(stamp int64) time.Time {
	if b.coarse != nil {
		return b.coarse.At(stamp)
	}
	return b.base.Add(time.Duration(stamp))
}

// SetLimit changes the limit at once; n must be in [1, MaxLimit]. Raising it
// issues permits to waiting requests before SetLimit returns. Lowering it
// below the permits in flight starts a drain: permits already out are kept,
// new acquires fail with ErrDraining (queued requests keep waiting, within
// their maximum wait) until in-flight drops below n. A queued request for
// more than n permits keeps waiting too, for a raise or its maximum wait,
// without holding up the requests behind it; a new one is refused at once
// (ErrAtCapacity).
func (b *Bulkhead) SetLimit(n int) error {
	if n < 1 || n > MaxLimit {
		return &ConfigError{"SetLimit n", n, "must be in [1, MaxLimit]"}
	}
	var es *events
	if b.observed {
		es = new(events)
	}
	b.lockNow(nil) // the limit is left as it was if Now exits the goroutine
	old := b.sem.Limit()
	if n == old {
		b.unlock()
		return nil
	}
	started, ended := b.sem.SetLimit(n)
	b.hot.limit.Store(int64(n))
	b.ghostLocked() // no fast acquire that read the old limit can now succeed
	if es != nil {
		now := b.at(b.stamp())
		b.record(es, Event{Code: EventCapChanged, Time: now, Detail: "from " + strconv.Itoa(old)})
		switch {
		case started:
			b.record(es, Event{Code: EventDrainActive, Time: now, Detail: "started"})
		case b.sem.Draining() && n < old:
			b.record(es, Event{Code: EventDrainActive, Time: now, Detail: "lowered again"})
		case b.sem.Draining():
			b.record(es, Event{Code: EventDrainActive, Time: now, Detail: "raised"})
		case ended:
			b.record(es, Event{Code: EventDrainComplete, Time: now})
		}
	}
	b.dispatchLocked(es)
	b.unlock()
	b.deliver(es)
	return nil
}

// Snapshots. Each is a best-effort reading that may be stale before the
// caller looks at it; see the package doc for why they must not decide
// admission.

// Limit returns the limit in force.
func (b *Bulkhead) Limit() int { return int(b.hot.limit.Load()) }

// Available returns how many permits are free: 0 while draining (a drain
// lasts while in-flight is at or above the limit).
func (b *Bulkhead) Available() int {
	return max(int(b.hot.limit.Load())-int(b.hot.state.Load()&usedMask), 0)
}

// InFlight returns how many permits are out.
func (b *Bulkhead) InFlight() int { return int(b.hot.state.Load() & usedMask) }

// QueueDepth returns how many requests are waiting.
func (b *Bulkhead) QueueDepth() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.waiters.Len()
}

// Draining reports whether a lowered limit is draining.
func (b *Bulkhead) Draining() bool {
	b.lock()
	defer b.unlock()
	return b.sem.Draining()
}
