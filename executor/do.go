package executor

import (
	"context"
	"errors"
)

// Do admits one unit of work for group under every limit, as a task of
// weight 1, and runs fn once it is admitted; it returns fn's error.
//
// The work waits in its group's FIFO queue like any task (the same order,
// shares, queue timeout and rejection policy) and is cancelled by ctx while
// it waits. fn's context is derived from ctx and is also cancelled by a
// shutdown's deadline or Close.
//
// When fn did not run, Do always returns an error, whatever the rejection
// policy, since the caller has no handle to look at: a *RejectedError
// matching ErrRejected (with ErrQueueTimeout, ErrDisplaced, ErrTooHeavy, ...
// as for Submit), one matching ErrShutdown or ErrGroupShutdown, ErrInvalidTask
// for invalid input, or ctx's error. Under policy.CallerRuns a refused fn
// runs in the caller outside the limits. A panic in fn releases its permits
// and is re-raised in Do's caller.
func (ex *Executor) Do(ctx context.Context, group string, fn func(context.Context) error) error {
	if fn == nil {
		return ex.Go(ctx, group, nil) // refused as invalid input
	}
	h, err := Submit(ex, ctx, Task[struct{}]{Group: group, Fn: func(ctx context.Context) (struct{}, error) {
		return struct{}{}, fn(ctx)
	}})
	if err != nil {
		return err
	}
	res, _ := h.Wait(context.Background())
	var pe *PanicError
	if res.Status == Failed && errors.As(res.Err, &pe) && res.Err == error(pe) {
		panic(pe.Value)
	}
	return res.Err
}
