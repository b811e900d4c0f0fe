package breaker_test

import (
	"bytes"
	"errors"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groupexec/groupexec/breaker"
	"github.com/groupexec/groupexec/clock"
)

var errBoom = errors.New("boom")

// t0 is the fake clocks' start.
var t0 = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

// fakeClock is a clock.Clock that moves only when told to. It is an
// atomic, not a clock.Fake, so that the race tests can move it from many
// goroutines without serialising them on a lock; Set puts it at t0 plus d.
type fakeClock struct{ ns atomic.Int64 }

var _ clock.Clock = (*fakeClock)(nil)

func (c *fakeClock) Now() time.Time          { return t0.Add(time.Duration(c.ns.Load())) }
func (c *fakeClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }
func (c *fakeClock) Set(d time.Duration)     { c.ns.Store(int64(d)) }
func (c *fakeClock) Elapsed() time.Duration  { return time.Duration(c.ns.Load()) }

// AfterFunc panics: a breaker reads the time and never schedules anything
// (it starts no goroutine), and every test that moves a fakeClock checks it.
func (c *fakeClock) AfterFunc(time.Duration, func()) clock.Timer {
	panic("breaker: AfterFunc called; a breaker must only read the time")
}

// transition is one OnStateChange call.
type transition struct {
	name     string
	from, to breaker.State
}

func (tr transition) String() string { return tr.from.String() + "->" + tr.to.String() }

// recorder collects OnStateChange calls.
type recorder struct {
	mu  sync.Mutex
	got []transition
}

func (r *recorder) record(name string, from, to breaker.State) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, transition{name, from, to})
}

func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var s []string
	for _, tr := range r.got {
		s = append(s, tr.String())
	}
	r.got = nil
	return s
}

// mustNew builds a breaker or fails the test.
func mustNew(t testing.TB, s breaker.Settings) *breaker.CircuitBreaker {
	t.Helper()
	cb, err := breaker.New(s)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return cb
}

func succeed() (int, error) { return 1, nil }
func fail() (int, error)    { return 0, errBoom }

// run makes one request through Execute and returns its error.
func run(cb *breaker.CircuitBreaker, ok bool) error {
	var err error
	if ok {
		_, err = breaker.Execute(cb, succeed)
	} else {
		_, err = breaker.Execute(cb, fail)
	}
	return err
}

func wantState(t *testing.T, cb *breaker.CircuitBreaker, want breaker.State) {
	t.Helper()
	if got := cb.State(); got != want {
		t.Fatalf("State() = %v, want %v", got, want)
	}
}

func wantCounts(t *testing.T, cb *breaker.CircuitBreaker, want breaker.Counts) {
	t.Helper()
	if got := cb.Counts(); got != want {
		t.Fatalf("Counts() = %+v, want %+v", got, want)
	}
}

func wantErr(t *testing.T, got, want error) {
	t.Helper()
	if !errors.Is(got, want) || (want == nil && got != nil) {
		t.Fatalf("error = %v, want %v", got, want)
	}
}

// trip opens a breaker with default ReadyToTrip (5 consecutive failures).
func trip(t *testing.T, cb *breaker.CircuitBreaker) {
	t.Helper()
	for range 5 {
		wantErr(t, run(cb, false), errBoom)
	}
	wantState(t, cb, breaker.StateOpen)
}

// goid returns the calling goroutine's id, read from its stack header.
func goid() uint64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	b = b[:bytes.IndexByte(b, ' ')]
	id, _ := strconv.ParseUint(string(b), 10, 64)
	return id
}
