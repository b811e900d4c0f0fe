package executor_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groupexec/groupexec/breaker"
	"github.com/groupexec/groupexec/clock"
	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

// pausingBreakerClock is a breaker clock whose next reading, once armed, waits
// until proceed is closed, after closing entered.
type pausingBreakerClock struct {
	*clock.Fake
	armed            atomic.Bool
	entered, proceed chan struct{}
}

func (c *pausingBreakerClock) Now() time.Time {
	if c.armed.CompareAndSwap(true, false) {
		close(c.entered)
		<-c.proceed
	}
	return c.Fake.Now()
}

// A group whose breaker is open starts no task (docs/admission.md): not
// even one the breaker let through as it was admitted, just before the
// failure of the group's running task opened it, and that the group
// starts at once, its running task gone.
func TestTaskLetThroughAsTheBreakerOpensDoesNotStartWhileItIsOpen(t *testing.T) {
	bc := &pausingBreakerClock{Fake: fakeClock(), entered: make(chan struct{}), proceed: make(chan struct{})}
	s := tripOnFirstFailure(breaker.Settings{Clock: bc})
	s.Interval = time.Hour // so that the breaker reads its clock as it lets a task through
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(1)}, executor.WithGroupBreaker(s))

	release := make(chan struct{})
	closeAtEnd(t, release)
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(bc.proceed) }) })
	first := submit(t, ex, executor.Task[int]{Group: "g", ID: "first", Fn: func(context.Context) (int, error) {
		<-release
		return 0, errBackend
	}})
	var openAtStart atomic.Bool
	var ran atomic.Bool
	late := make(chan *executor.Handle[int], 1)
	bc.armed.Store(true)
	go func() {
		h, _ := executor.Submit(ex, bg, executor.Task[int]{Group: "g", ID: "late", Fn: func(context.Context) (int, error) {
			ran.Store(true)
			s, _ := ex.GroupStats("g")
			openAtStart.Store(s.Breaker == breaker.StateOpen)
			return 0, nil
		}})
		late <- h
	}()
	recv(t, bc.entered, "the breaker asked about late")
	close(release) // first fails: the breaker opens; g has nothing running
	if r := wait(t, first); r.Status != executor.Failed {
		t.Fatalf("first: %+v, want Failed", r)
	}
	if st := groupStats(t, ex, "g"); st.Breaker != breaker.StateOpen {
		t.Fatalf("g: %+v, want its breaker open", st)
	}
	once.Do(func() { close(bc.proceed) })
	r := wait(t, recv(t, late, "late's handle"))
	if ran.Load() || !errors.Is(r.Err, breaker.ErrOpenState) {
		t.Errorf("late: %+v, ran %v (breaker open as it began: %v); want refused by the open breaker, never run",
			r, ran.Load(), openAtStart.Load())
	}
}
