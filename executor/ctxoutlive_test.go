package executor_test

import (
	"context"
	"testing"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

// Fn's context, kept by a goroutine that outlives the call, keeps the
// context contract after the call returns: once Err reports an error, Done
// is closed. A goroutine waiting on Done for the caller's context to end
// must not wait for ever.
func TestDoContextKeptAfterReturnKeepsTheContract(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(1)})
	parent, cancel := context.WithCancel(bg)
	defer cancel()
	var kept context.Context
	err := ex.Do(parent, "g", func(ctx context.Context) error {
		_ = ctx.Done() // asked for while the call runs, as a select on it does
		kept = ctx
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := kept.Err(); err != nil {
		select {
		case <-kept.Done():
		default:
			t.Fatalf("Err() = %v, but Done is not closed", err)
		}
	}
}

// The same for a submitted task's context.
func TestSubmitContextKeptAfterReturnKeepsTheContract(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(1)})
	parent, cancel := context.WithCancel(bg)
	defer cancel()
	var kept context.Context
	h, err := executor.Submit(ex, parent, executor.Task[int]{Group: "g", Fn: func(ctx context.Context) (int, error) {
		_ = ctx.Done()
		kept = ctx
		return 0, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	wait(t, h)
	cancel()
	if err := kept.Err(); err != nil {
		select {
		case <-kept.Done():
		default:
			t.Fatalf("Err() = %v, but Done is not closed", err)
		}
	}
}
