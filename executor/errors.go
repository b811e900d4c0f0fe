package executor

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"

	"github.com/groupexec/groupexec/internal/clip"
)

var (
	// ErrRejected is matched by every error of a task that was refused and
	// never ran: for lack of room, a queue timeout, a shutdown, a task that
	// can never fit, or invalid input. errors.As gives the *RejectedError.
	ErrRejected = errors.New("executor: task rejected")
	// ErrInvalidOption is matched (with errors.Is) by every error New
	// returns: a nil or zero policy, a nil Option, an option's invalid
	// value, or a Limiter that refuses to attach. The error's text names
	// the option and value; errors.As reaches the error under it, where
	// there is one (a *breaker.SettingsError, say).
	ErrInvalidOption = errors.New("executor: invalid option")
	// ErrInvalidTask marks a task refused for invalid input: a nil Fn, an empty
	// group key, a negative weight or a nil context.
	ErrInvalidTask = errors.New("executor: invalid task")
	// ErrQueueTimeout marks a task that waited longer than the policy's queue
	// timeout. It never ran.
	ErrQueueTimeout = errors.New("executor: queue timeout")
	// ErrTooHeavy marks a task whose weight exceeds a limit it must pass, so
	// it could never run. It is refused whatever the rejection policy.
	ErrTooHeavy = errors.New("executor: task weight exceeds a limit")
	// ErrShutdown marks a task refused, or cancelled, because the executor is
	// shutting down or closed.
	ErrShutdown = errors.New("executor: shut down")
	// ErrGroupShutdown marks a task refused, or cancelled, because its group
	// was shut down with ShutdownGroup.
	ErrGroupShutdown = errors.New("executor: group shut down")
	// ErrDisplaced marks a waiting task that never ran because, under
	// policy.DiscardOldest, a newer task of its group took its place in a
	// full queue. Its error matches ErrRejected too.
	ErrDisplaced = errors.New("executor: displaced by a newer task")
	// ErrCalledFromTask is returned by Shutdown and Close called from a
	// callback an executor runs (a listener, a rejection handler, a group
	// breaker's OnStateChange), where they cannot wait for the task it runs
	// for: they stopped the executor without waiting.
	ErrCalledFromTask = errors.New("executor: Shutdown or Close called from a callback of an executor; it did not wait")
	// ErrGoexit is the error of a task whose Fn called runtime.Goexit. It is
	// also the cause of the rejection told to the listener of a task whose
	// admission a group breaker's OnStateChange ended that way (see
	// WithGroupBreaker).
	ErrGoexit = errors.New("executor: task called runtime.Goexit")
)

// Limit names what refused a task.
type Limit string

// The limits and thresholds a task can be refused by.
const (
	LimitGlobalInFlight   Limit = "global in-flight"       // policy.WithGlobalMaxInFlight, for a task too heavy for it
	LimitGroupInFlight    Limit = "group in-flight"        // the group's bulkhead (WithDefaultMaxInFlight)
	LimitGroupConcurrency Limit = "group concurrency"      // WithDefaultMaxConcurrency, for a task too heavy for it
	LimitGlobalQueue      Limit = "global queue threshold" // policy.WithGlobalQueueThreshold
	LimitGroupQueue       Limit = "group queue threshold"  // WithDefaultQueueThreshold; also a task displaced (ErrDisplaced)
	LimitQueueTimeout     Limit = "queue timeout"          // policy.WithQueueTimeout (ErrQueueTimeout)
	LimitShutdown         Limit = "shutdown"               // the executor or the group is shut down (ErrShutdown, ErrGroupShutdown)
	LimitBreaker          Limit = "circuit breaker"        // the group's breaker (breaker.ErrOpenState, ErrTooManyRequests)
	LimitResolver         Limit = "limit resolver"         // a resolver gave an invalid value
	LimitInvalid          Limit = "invalid task"           // invalid input (ErrInvalidTask)
	LimitClusterGlobal    Limit = "cluster global limiter" // WithGlobalLimiter refused the task
	LimitClusterGroup     Limit = "cluster group limiter"  // WithGroupLimiter refused the task
)

// RejectedError says why a task was refused. It matches ErrRejected and,
// through Unwrap, its cause (ErrQueueTimeout, ErrTooHeavy, ErrShutdown,
// ErrGroupShutdown, ErrInvalidTask, ErrDisplaced, breaker.ErrOpenState,
// breaker.ErrTooManyRequests), when there is one.
type RejectedError struct {
	Group  string // the task's group
	ID     string // the task's ID, possibly empty
	Limit  Limit  // what refused it: a limit, a threshold, a shutdown, a breaker
	Weight int    // the task's weight, in permits
	Used   int    // what the limit had in use when it refused (permits, or tasks for a queue)
	Max    int    // the limit (permits, or tasks for a queue)
	Err    error  // the cause, or nil for plain lack of room
}

// Error names the task, its group and the limit that refused it, with the
// limit's use and maximum where it has them, and the cause. A task without
// an ID, as every Do and Go call is, is not named: an empty quoted ID in
// every refusal a service logs says nothing. Nor is a cause that only
// repeats the limit (ErrQueueTimeout for LimitQueueTimeout): errors.Is
// still finds it. A group key or ID over 128 bytes is quoted by its first
// 128 bytes (cut where a UTF-8 character starts) and how many more it has:
// both may be a client's, and one of a megabyte made every message a
// megabyte. Group and ID hold them whole.
func (e *RejectedError) Error() string {
	var msg string
	if e.ID == "" {
		msg = fmt.Sprintf("executor: task of group %s rejected by %s", clip.Quote(e.Group), e.Limit)
	} else {
		msg = fmt.Sprintf("executor: task %s of group %s rejected by %s", clip.Quote(e.ID), clip.Quote(e.Group), e.Limit)
	}
	switch e.Limit {
	case LimitShutdown, LimitInvalid, LimitQueueTimeout, LimitBreaker, LimitResolver,
		LimitClusterGlobal, LimitClusterGroup: // no use or maximum: a limiter's error says why
	default:
		msg += fmt.Sprintf(" (weight %d, used %d of %d)", e.Weight, e.Used, e.Max)
	}
	if e.Err != nil && (e.Limit != LimitQueueTimeout || e.Err != ErrQueueTimeout) {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Is reports whether target is ErrRejected.
func (e *RejectedError) Is(target error) bool { return target == ErrRejected }

// Unwrap returns the cause.
func (e *RejectedError) Unwrap() error { return e.Err }

// PanicError is the error of a task whose Fn panicked.
type PanicError struct {
	Value any    // what was passed to panic
	Stack []byte // the panicking goroutine's stack
}

func newPanicError(v any) *PanicError { return &PanicError{Value: v, Stack: debug.Stack()} }

// Error gives the panic value.
func (e *PanicError) Error() string { return fmt.Sprintf("executor: task panicked: %v", e.Value) }

// Unwrap returns the panic value when it is an error.
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}

// errDoneNilErr is the error of a call whose context's Done is closed while
// its Err is nil, against context.Context's contract: a nil error would say
// that Do's fn ran and succeeded, or that Wait has the task's outcome. (A
// context derived from such a one panics in the context package as its
// parent's Done closes: Submit's watcher of its context is one.)
var errDoneNilErr = fmt.Errorf("executor: the context's Done is closed but its Err is nil: %w", context.Canceled)

// doneErr returns the error of ctx, whose Done is closed.
func doneErr(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return errDoneNilErr
}

// doneCause returns the cause of ctx, whose Done is closed.
func doneCause(ctx context.Context) error {
	if cause := context.Cause(ctx); cause != nil {
		return cause
	}
	return errDoneNilErr
}

// optionError is an error New returns: it reads as err, which names the
// option and value, and matches ErrInvalidOption as well as what err
// matches.
type optionError struct{ err error }

func invalidOption(err error) error { return &optionError{err} }

func (e *optionError) Error() string        { return e.err.Error() }
func (e *optionError) Unwrap() error        { return e.err }
func (e *optionError) Is(target error) bool { return target == ErrInvalidOption }
