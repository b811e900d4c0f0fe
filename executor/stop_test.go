package executor_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

// How a task's Fn watches its context. The executor signals each kind its
// own way when a group stops (context.go): a context that is the job itself
// and was never asked for Done reads the group's stop in Err; one asked for
// Done has a channel, closed by the stop; one derived from a cancellable
// Submit context is cancelled by the stop.
var watchKinds = []struct {
	name string
	ctx  func() context.Context // Submit's context
	wait func(ctx context.Context, abort <-chan struct{}) error
}{
	{"polls Err", func() context.Context { return bg }, pollErr},
	{"waits on Done", func() context.Context { return bg }, waitDone},
	{"polls Err, cancellable Submit ctx", cancellable, pollErr},
	{"waits on Done, cancellable Submit ctx", cancellable, waitDone},
}

// cancellable returns a context that can be, but is never, cancelled.
func cancellable() context.Context {
	ctx, cancel := context.WithCancel(bg)
	_ = cancel // never called: the context must only be cancellable
	return ctx
}

var errAborted = errors.New("the test gave up waiting for the cancellation")

func pollErr(ctx context.Context, abort <-chan struct{}) error {
	for ctx.Err() == nil {
		select {
		case <-abort:
			return errAborted
		default:
			runtime.Gosched()
		}
	}
	select {
	case <-ctx.Done():
	default:
		return errors.New("Err is set but Done is not closed")
	}
	return ctx.Err()
}

func waitDone(ctx context.Context, abort <-chan struct{}) error {
	select {
	case <-ctx.Done():
	case <-abort:
		return errAborted
	}
	if ctx.Err() == nil {
		return errors.New("Done is closed but Err is nil")
	}
	return ctx.Err()
}

// stops are the ways a group's running tasks get their contexts cancelled.
var stops = []struct {
	name   string
	stop   func(ex *executor.Executor) error
	reason error // what the cause of a cancelled task's context matches
}{
	{"ShutdownGroup past its deadline", func(ex *executor.Executor) error { return ex.ShutdownGroup(done(), "g") }, executor.ErrGroupShutdown},
	{"Shutdown past its deadline", func(ex *executor.Executor) error { return ex.Shutdown(done()) }, executor.ErrShutdown},
	{"Close", func(ex *executor.Executor) error { return ex.Close() }, executor.ErrShutdown},
}

func done() context.Context {
	ctx, cancel := context.WithCancel(bg)
	cancel()
	return ctx
}

// TestStopCancelsRunningTasks: every way a Fn can watch its context sees a
// stop of its group, for tasks submitted with Submit and with Go.
func TestStopCancelsRunningTasks(t *testing.T) {
	for _, s := range stops {
		for _, k := range watchKinds {
			for _, viaGo := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/%s/go=%v", s.name, k.name, viaGo), func(t *testing.T) {
					ex := newExec(t, nil)
					abort := make(chan struct{})
					t.Cleanup(func() { close(abort) })
					started := make(chan struct{}, 1)
					got := make(chan error, 1)
					fn := func(ctx context.Context) error {
						started <- struct{}{}
						err := k.wait(ctx, abort)
						got <- err
						return err
					}
					if viaGo {
						if err := ex.Go(k.ctx(), "g", fn); err != nil {
							t.Fatal(err)
						}
					} else if _, err := executor.Submit(ex, k.ctx(), executor.Task[int]{Group: "g", Fn: func(ctx context.Context) (int, error) { return 0, fn(ctx) }}); err != nil {
						t.Fatal(err)
					}
					recv(t, started, "the task started")
					go s.stop(ex)
					select {
					case err := <-got:
						if !errors.Is(err, context.Canceled) {
							t.Fatalf("Fn saw %v, want context.Canceled", err)
						}
					case <-time.After(10 * time.Second): // a hang guard
						t.Fatal("the stop did not reach the running task")
					}
				})
			}
		}
	}
}

// TestStopCause: a Fn whose context a stop of its group cancelled reads
// the stop's reason with context.Cause, as it would from a context derived
// with context.WithCancelCause and cancelled by the stop, however it
// watches its context and whichever call started it: the context may be a
// standard one, the task itself, or its group's.
func TestStopCause(t *testing.T) {
	starts := []struct {
		name  string
		start func(ex *executor.Executor, ctx context.Context, fn func(context.Context) error) error
	}{
		{"Submit", func(ex *executor.Executor, ctx context.Context, fn func(context.Context) error) error {
			_, err := executor.Submit(ex, ctx, executor.Task[int]{Group: "g", Fn: func(ctx context.Context) (int, error) { return 0, fn(ctx) }})
			return err
		}},
		{"Go", func(ex *executor.Executor, ctx context.Context, fn func(context.Context) error) error {
			return ex.Go(ctx, "g", fn)
		}},
		{"Do", func(ex *executor.Executor, ctx context.Context, fn func(context.Context) error) error {
			go ex.Do(ctx, "g", fn) // returns once fn has, which Close waits for
			return nil
		}},
	}
	for _, s := range stops {
		for _, k := range watchKinds {
			for _, st := range starts {
				t.Run(fmt.Sprintf("%s/%s/%s", s.name, k.name, st.name), func(t *testing.T) {
					ex := newExec(t, nil)
					abort := make(chan struct{})
					t.Cleanup(func() { close(abort) })
					started := make(chan struct{}, 1)
					got := make(chan error, 1)
					fn := func(ctx context.Context) error {
						started <- struct{}{}
						if err := k.wait(ctx, abort); !errors.Is(err, context.Canceled) {
							got <- fmt.Errorf("not cancelled: %w", err)
							return err
						}
						got <- context.Cause(ctx)
						return nil
					}
					if err := st.start(ex, k.ctx(), fn); err != nil {
						t.Fatal(err)
					}
					recv(t, started, "the task started")
					go s.stop(ex)
					select {
					case cause := <-got:
						if !errors.Is(cause, s.reason) || !errors.Is(cause, context.Canceled) {
							t.Fatalf("context.Cause: %v, want an error matching %v and context.Canceled", cause, s.reason)
						}
					case <-time.After(10 * time.Second): // a hang guard
						t.Fatal("the stop did not reach the running task")
					}
				})
			}
		}
	}
}

// TestShutdownGroupSparesOtherGroups: a group's stop reaches no other
// group's tasks, however they watch their contexts.
func TestShutdownGroupSparesOtherGroups(t *testing.T) {
	for _, k := range watchKinds {
		t.Run(k.name, func(t *testing.T) {
			ex := newExec(t, nil)
			release := make(chan struct{})
			started := make(chan struct{}, 2)
			seen := make(chan error, 2)
			for _, grp := range []string{"g", "other"} {
				if _, err := executor.Submit(ex, k.ctx(), executor.Task[int]{Group: grp, Fn: func(ctx context.Context) (int, error) {
					started <- struct{}{}
					err := k.wait(ctx, release)
					if grp == "other" {
						seen <- err
					}
					return 0, err
				}}); err != nil {
					t.Fatal(err)
				}
			}
			recv(t, started, "the first task started")
			recv(t, started, "the second task started")
			if err := ex.ShutdownGroup(done(), "g"); !errors.Is(err, context.Canceled) {
				t.Fatalf("ShutdownGroup: %v", err)
			}
			close(release)
			if err := recv(t, seen, "the other group's task returned once released"); !errors.Is(err, errAborted) {
				t.Errorf("the other group's task saw %v, want no cancellation", err)
			}
		})
	}
}

// TestDoneAfterStopIsClosed: a task that read its group's stop in Err, and
// only then asks for Done, gets a closed channel.
func TestDoneAfterStopIsClosed(t *testing.T) {
	ex := newExec(t, nil)
	abort := make(chan struct{})
	defer close(abort)
	started := make(chan struct{})
	h := submit(t, ex, executor.Task[bool]{Group: "g", Fn: func(ctx context.Context) (bool, error) {
		close(started)
		if err := pollErr(ctx, abort); !errors.Is(err, context.Canceled) {
			return false, err
		}
		select {
		case <-ctx.Done():
			return true, nil
		default:
			return false, nil
		}
	}})
	recv(t, started, "the task started")
	ex.ShutdownGroup(done(), "g")
	if r := wait(t, h); !r.Value || r.Err != nil {
		t.Errorf("%+v: Done after the stop is not closed", r)
	}
}

// TestCallerRunsIsNotStopped: a task run by CallerRuns belongs to its
// caller: a stop of its group does not cancel its context.
// A task started with Go and context.Background runs, when the executor
// runs it, with its group's context (recycle.go); run by its caller, it
// must not: the group's stop would reach it.
func TestCallerRunsIsNotStopped(t *testing.T) {
	for _, k := range watchKinds {
		for _, viaGo := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/go=%v", k.name, viaGo), func(t *testing.T) {
				ex, _ := full(t, policy.CallerRuns)
				started, stopped := make(chan struct{}), make(chan struct{})
				seen := make(chan error, 1)
				var wg sync.WaitGroup
				refused := make(chan error, 1)
				fn := func(ctx context.Context) error {
					close(started)
					<-stopped
					err := k.wait(ctx, closed())
					seen <- err
					return err
				}
				wg.Go(func() {
					var err error
					if viaGo {
						err = ex.Go(k.ctx(), "g", fn)
					} else {
						_, err = executor.Submit(ex, k.ctx(), executor.Task[int]{Group: "g", Fn: func(ctx context.Context) (int, error) { return 0, fn(ctx) }})
					}
					if err != nil {
						refused <- err
					}
				})
				select {
				case <-started:
				case err := <-refused:
					t.Fatalf("Submit: %v, want the task run by its caller", err)
				case <-time.After(hangGuard):
					t.Fatalf("the task refused did not start in its caller: not within %v", hangGuard)
				}
				ex.ShutdownGroup(done(), "g")
				close(stopped)
				waitAll(t, &wg, "the call run by its caller returned")
				if err := recv(t, seen, "the caller-run task returned"); !errors.Is(err, errAborted) {
					t.Errorf("the caller-run task saw %v, want no cancellation", err)
				}
			})
		}
	}
}

func closed() <-chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}
