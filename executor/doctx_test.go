package executor_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/groupexec/groupexec/policy"
)

// A Do call's context that can be cancelled is not its task: the task is
// reused by later calls once the call ends. fn's context, kept past the
// call, answers as a standard run context does once its run has ended:
// cancelled, with the call's context's values and deadline.
func TestDoContextKeptWithoutDoneEndsWithTheCall(t *testing.T) {
	ex := newExec(t, nil)
	type key struct{}
	deadline := time.Now().Add(time.Hour)
	parent, cancel := context.WithDeadline(context.WithValue(bg, key{}, "v"), deadline)
	defer cancel()
	var kept context.Context
	if err := ex.Do(parent, "g", func(ctx context.Context) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		kept = ctx
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// Later calls reuse the task, in the same group and in another one.
	for _, g := range []string{"g", "h", "g"} {
		if err := ex.Do(parent, g, func(ctx context.Context) error { return ctx.Err() }); err != nil {
			t.Fatal(err)
		}
	}
	if err := kept.Err(); !errors.Is(err, context.Canceled) {
		t.Errorf("Err after the call = %v, want context.Canceled", err)
	}
	if err := context.Cause(kept); !errors.Is(err, context.Canceled) {
		t.Errorf("context.Cause after the call = %v, want context.Canceled", err)
	}
	select {
	case <-kept.Done():
	default:
		t.Error("Done after the call is not closed")
	}
	if v := kept.Value(key{}); v != "v" {
		t.Errorf("Value after the call = %v, want the call's context's", v)
	}
	if d, ok := kept.Deadline(); !ok || !d.Equal(deadline) {
		t.Errorf("Deadline after the call = %v, %v, want the call's context's", d, ok)
	}
	cancel()
	if err := kept.Err(); !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
		t.Errorf("Err once the call's context ended = %v", err)
	}
}

// Done returns the same channel before and after the call's end, as the
// context contract requires of successive calls: the channel fn asked for
// is closed when the call ends.
func TestDoContextDoneIsTheSameChannelAfterTheCall(t *testing.T) {
	ex := newExec(t, nil)
	parent, cancel := context.WithCancel(bg)
	defer cancel()
	var kept context.Context
	var during <-chan struct{}
	if err := ex.Do(parent, "g", func(ctx context.Context) error {
		kept, during = ctx, ctx.Done()
		select {
		case <-during:
			return errors.New("Done closed while the call runs")
		default:
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := ex.Do(parent, "g", func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if after := kept.Done(); after != during {
		t.Error("Done after the call returned another channel than during it")
	}
	select {
	case <-during:
	default:
		t.Fatal("the channel Done handed out is not closed once the call ended")
	}
	if err := kept.Err(); !errors.Is(err, context.Canceled) {
		t.Errorf("Err after the call = %v, want context.Canceled", err)
	}
}

// Goroutines that fn started keep using its context while the call ends
// and its task is reused by other calls: each kept context answers for
// its own call only. It reports the end only once fn has returned, always
// once the call has, and never nil again after that; and Done is then
// closed. Run under -race, it also checks that the reuse never races with
// a kept context's methods.
func TestDoContextKeptWhileItsTaskIsReused(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(2)})
	parent, cancel := context.WithCancel(bg)
	defer cancel()
	const calls = 2000
	var wg sync.WaitGroup
	errs := make(chan error, 1)
	fail := func(err error) {
		select {
		case errs <- err:
		default:
		}
	}
	closed := func(c <-chan struct{}) bool {
		select {
		case <-c:
			return true
		default:
			return false
		}
	}
	for i := range calls {
		fnReturned, returned := make(chan struct{}), make(chan struct{})
		err := ex.Do(parent, "g", func(ctx context.Context) error {
			defer close(fnReturned)
			wg.Add(1)
			go func() {
				defer wg.Done()
				// Some ask for Done while the call runs, some after.
				if i%2 == 0 {
					ctx.Done()
				}
				for ended := false; ; {
					after := closed(returned)
					err := ctx.Err()
					switch {
					case err == nil && (ended || after):
						fail(fmt.Errorf("call %d: Err reported nil after the end", i))
						return
					case err != nil && !closed(fnReturned):
						fail(fmt.Errorf("call %d: Err reported %v before fn returned", i, err))
						return
					case err != nil && !ended:
						ended = true
						continue // once more: it must not go back to nil
					case err != nil:
						if !closed(ctx.Done()) {
							fail(fmt.Errorf("call %d: Err reported %v but Done is not closed", i, err))
						}
						return
					}
				}
			}()
			return nil
		})
		close(returned)
		if err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
}
