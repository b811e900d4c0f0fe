package bulkhead

import (
	"context"
	"errors"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/groupexec/groupexec/outcome"
)

// Status is how an admitted operation ended: the module's one outcome
// vocabulary (package outcome), under the bulkhead's name. A refused
// operation has no Result (Submit returns the refusal), so a Result's
// Status is never outcome.Rejected.
type Status = outcome.Status

// An operation's Status, as package outcome defines them.
const (
	// Success: the function returned a nil error.
	Success = outcome.Success
	// Failed: the function returned an error that is not a cancellation,
	// panicked or called runtime.Goexit.
	Failed = outcome.Failed
	// Cancelled: the handle was cancelled, or the function's error is or
	// wraps context.Canceled (at any depth).
	Cancelled = outcome.Cancelled
)

// Result is an admitted operation's outcome.
type Result[T any] struct {
	Status Status // Success, Failed or Cancelled
	Value  T      // the function's value; the zero T unless Success
	Err    error  // the function's error, a *PanicError, ErrGoexit, or context.Canceled for a cancelled handle
}

// Handle is one operation admitted by Submit.
type Handle[T any] struct {
	b      *Bulkhead
	permit Permit
	state  atomic.Bool // completed
	cancel context.CancelCauseFunc
	parent doneParentAfterFunc // holds fn's context's parent: the caller's context (doneparent.go)
	done   chan struct{}
	res    Result[T]
}

// ErrCancelled is the cause of the function's context when its handle is
// cancelled.
var ErrCancelled = errors.New("bulkhead: handle cancelled")

// Submit admits fn as Acquire(ctx, 1) does (waiting in the queue when there
// is one) and runs it on its own goroutine with a context derived from ctx.
// A refusal is returned as the error, and fn is not called. fn is called at
// most once, only with a permit; the permit is released exactly once, when fn
// returns, panics (the handle completes Failed with a *PanicError, as it
// does when fn's error panics as it is classified: errors.Is calls its Is
// and Unwrap) or the handle is cancelled, and always before the handle
// completes, so a caller that has seen the result can count on the
// capacity being back.
//
// Cancel releases the permit at once and cancels fn's context: the bulkhead
// follows the caller's interest. A function that ignores its context keeps
// running after that, no longer counted: bound such functions some other
// way. A nil b, fn or ctx is a *ConfigError, and takes no permit.
//
// A ctx whose Done is closed while its Err reports nil (against
// context.Context's contract) is taken for a cancelled one: with a queue
// Submit refuses it, with an error that matches context.Canceled; without
// one fn runs with its context cancelled (context.Canceled), and so does a
// running fn's context once ctx's Done closes.
func Submit[T any](b *Bulkhead, ctx context.Context, fn func(context.Context) (T, error)) (*Handle[T], error) {
	if b == nil {
		return nil, &ConfigError{"Submit b", nil, "must not be nil"}
	}
	if fn == nil {
		return nil, &ConfigError{"Submit fn", nil, "must not be nil"}
	}
	if ctx == nil {
		return nil, &ConfigError{"Submit ctx", nil, "must not be nil"}
	}
	h, runCtx, err := admit(b, ctx, fn)
	if err != nil {
		return nil, err
	}
	go h.run(runCtx, fn)
	return h, nil
}

// admit is Submit up to starting fn's goroutine: the permit and the handle,
// and fn's context. Tests start the goroutine themselves, to order it
// against Cancel.
func admit[T any](b *Bulkhead, ctx context.Context, _ func(context.Context) (T, error)) (*Handle[T], context.Context, error) {
	if b.maxDepth > 0 && b.admits(ctx) && ctx.Err() == nil && doneWithoutErr(ctx) != nil {
		// Acquire refuses a context that has ended only by its Err, which
		// here is nil: refused as a cancelled one, as a waiter whose Done
		// closes with a nil Err is (doneErr). Deriving fn's context reads
		// ctx's Done anyway. One without the required capability is left
		// to Acquire, which refuses it for that first, whatever its
		// context (WithRequiredCapability).
		b.refuseEnded(errDoneNilErr)
		return nil, nil, errDoneNilErr
	}
	p, err := b.Acquire(ctx, 1)
	if err != nil {
		return nil, nil, err
	}
	h := &Handle[T]{b: b, permit: p, done: make(chan struct{})}
	// Deriving fn's context reads ctx (its Done, and its Err if it has
	// ended): the caller's code, which may panic or exit the goroutine.
	// The permit then goes back on the way up: no handle holds it. The
	// release tells the listener, which may exit the goroutine
	// (runtime.Goexit) and so drop the panic under way: the panic is
	// recovered first and raised again from a deferred call, which runs
	// even then, so that it reaches Submit's caller.
	derived := false
	defer func() {
		if !derived {
			if r := recover(); r != nil {
				defer panic(r)
			}
			_ = b.Release(p)
		}
	}()
	var runCtx context.Context
	runCtx, h.cancel = context.WithCancelCause(parentOf(&h.parent, ctx))
	derived = true
	return h, runCtx, nil
}

func (h *Handle[T]) run(ctx context.Context, fn func(context.Context) (T, error)) {
	if h.state.Load() {
		// Cancelled before this goroutine started: its permit is back, so
		// fn must not run. (A Cancel from here on cancels a running fn.)
		// The Cancel may not have cancelled fn's context yet.
		h.cancelOnRun(context.Canceled)
		return
	}
	var start time.Time
	timed := false
	returned := false
	var res Result[T]
	// In a deferred call of its own, so that the handle completes, and fn's
	// context ends, even if a listener told of the latency, or the clock as
	// the run is timed, exits the goroutine (runtime.Goexit, which notify
	// and readClock cannot recover). If a Cancel completed the handle, it
	// ends the context.
	defer func() { h.complete(res, context.Canceled, true) }()
	defer func() {
		if !returned {
			res.Status = Failed
			if v := recover(); v != nil {
				res.Err = &PanicError{Value: v, Stack: debug.Stack()}
			} else {
				res.Err = ErrGoexit
			}
			h.b.recordRun(start, timed)
		}
	}()
	// After the deferred calls: a clock whose Now exits the goroutine
	// fails the run with ErrGoexit before fn runs, and the handle completes.
	start, timed = h.b.readClock()
	v, err := fn(ctx)
	// Classifying err calls its methods (errors.Is: Is, Unwrap), fn's code
	// too: a typed-nil error whose Unwrap reads its receiver panics there.
	// Before returned, so that the run then fails as if fn had panicked,
	// instead of ending the program from this goroutine.
	status := outcome.Classify(err)
	returned = true
	res = Result[T]{Status: status, Value: v, Err: err}
	if res.Status != Success {
		res.Value = *new(T)
	}
	// Before the handle completes, so that a caller that has seen the
	// result finds its latency in P99 and WithinTarget.
	h.b.recordRun(start, timed)
}

// readClock reads the clock on Submit's goroutine, reporting false if Now
// panicked: a clock given to WithClock is user code, and a panic on this
// goroutine, which nothing above recovers, would end the program (and
// before the handle completes, keep its permit for good). The real clock,
// which never panics, is read without a deferred recover: Submit reads it
// twice per run.
func (b *Bulkhead) readClock() (time.Time, bool) {
	if b.realClk {
		return b.clk.Now(), true
	}
	return b.readInjectedClock()
}

// readInjectedClock is readClock for a clock given to WithClock.
func (b *Bulkhead) readInjectedClock() (t time.Time, ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	return b.clk.Now(), true
}

// recordRun records the latency of a run that began at start. A run the
// clock could not time (timed false: Now panicked, or exited the
// goroutine, at its start; or ok false: it panicked at its end) records
// none, and one not timed at its start reads no clock at its end.
func (b *Bulkhead) recordRun(start time.Time, timed bool) {
	if !timed {
		return
	}
	if end, ok := b.readClock(); ok {
		b.RecordLatency(end.Sub(start))
	}
}

// complete ends the handle once: it releases the permit, then publishes
// res and cancels fn's context with cause, on Submit's goroutine if onRun
// (cancelOnRun).
func (h *Handle[T]) complete(res Result[T], cause error, onRun bool) bool {
	if !h.state.CompareAndSwap(false, true) {
		return false
	}
	// Deferred, so that the handle completes and fn's context ends even if
	// a listener told of the release exits the goroutine (runtime.Goexit):
	// the goroutine may be a Cancel caller's, and the handle another's.
	if onRun {
		defer h.cancelOnRun(cause)
	} else {
		defer h.cancel(cause) // a panic from ctx goes on up to Cancel's caller
	}
	defer func() {
		h.res = res
		close(h.done)
	}()
	// An error here means the caller released h.Permit() by hand: the
	// permit is back either way.
	_ = h.b.Release(h.permit)
	return true
}

// Cancel ends the operation as Cancelled, if it has not ended: its permit is
// released and its function's context cancelled (cause ErrCancelled). It
// reports whether it did.
func (h *Handle[T]) Cancel() bool {
	return h.complete(Result[T]{Status: Cancelled, Err: context.Canceled}, ErrCancelled, false)
}

// cancelOnRun cancels fn's context on Submit's goroutine. Cancelling it
// unlinks it from the caller's context, reading that one's Done: the
// caller's code, and a panic from it here, where nothing above recovers,
// would end the program. The panic is dropped, as a clock's is here
// (readClock): fn's context is cancelled before that read
// (context.WithCancelCause), and the handle has completed.
func (h *Handle[T]) cancelOnRun(cause error) {
	defer func() { _ = recover() }()
	h.cancel(cause)
}

// Done is closed when the operation has ended.
func (h *Handle[T]) Done() <-chan struct{} { return h.done }

// Wait waits for the result; if ctx ends first it returns ctx's error (the
// operation goes on; for a ctx whose Done is closed while its Err is nil,
// an error that matches context.Canceled). A handle that has completed
// returns its result, even with a ctx that has ended. A nil ctx is a
// *ConfigError.
func (h *Handle[T]) Wait(ctx context.Context) (Result[T], error) {
	if ctx == nil {
		return Result[T]{}, &ConfigError{"Wait ctx", nil, "must not be nil"}
	}
	// When both channels are ready select picks either: look at done first.
	select {
	case <-h.done:
		return h.res, nil
	default:
	}
	select {
	case <-h.done:
		return h.res, nil
	case <-ctx.Done():
		if err := ctx.Err(); err != nil {
			return Result[T]{}, err
		}
		// Done closed with a nil Err (against context.Context's contract):
		// a nil error would pass the zero Result for the outcome.
		return Result[T]{}, errDoneNilErr
	}
}

// Permit returns the operation's permit, for its ID and times. The handle
// releases it; do not release it yourself.
func (h *Handle[T]) Permit() Permit { return h.permit }
