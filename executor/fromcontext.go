package executor

import (
	"context"
	"fmt"
	"time"

	"github.com/groupexec/groupexec/internal/taskvalue"
)

// GroupFromContext returns the group that the work given ctx was submitted
// for, when ctx is the context the executor passed to that work's function
// (Do's fn, a Task's Fn, Go's fn, ExecuteAll's), or one derived from it:
// the group as Do, Submit or Go was given it, so that a request handler run
// by Do (httpadmit.Handler, grpcadmit's server interceptors) need not
// derive it again from the request. ok is false for any other context.
// Within nested work (a Do inside a task), the innermost group answers.
//
// Work run in its caller outside the limits, refused under
// policy.CallerRuns or through Rejection.RunInCaller, is given the group it
// was submitted for, though it was not admitted under its limits.
//
// A Do call's context, unless Do was given context.Background, answers
// while fn runs; kept past the call, once Do has returned, it may answer
// false, as its task may serve another call by then: ask while fn runs.
// Every other context keeps answering.
//
// It costs a context lookup, and nothing unless it is called.
func GroupFromContext(ctx context.Context) (group string, ok bool) {
	return groupIn(ctx)
}

// groupIn is GroupFromContext, where the name group is the type's.
func groupIn(ctx context.Context) (string, bool) {
	if ctx == nil {
		return "", false
	}
	if g, _ := ctx.Value(groupKey{}).(*group); g != nil {
		return g.key, true
	}
	return "", false
}

// groupKey is the key under which the executor's run contexts answer
// their task's *group (GroupFromContext). Their Value methods test for it
// first: a comparison of types, and no allocation, a group being a
// pointer.
type groupKey struct{}

// isGroupKey reports whether key is GroupFromContext's.
func isGroupKey(key any) bool {
	_, ok := key.(groupKey)
	return ok
}

// parentCtx is a task's Submit (or Do) context, as the parent of the
// standard context its Fn runs with (runContext): the same context, but
// for the key of GroupFromContext, which it answers with the task's group,
// since a standard context asks its parent for every value, and for the
// keys of values that belong to one task (taskvalue), which it does not
// pass on. It is the task
// itself, so that it costs no allocation; its parent is set once, before
// the task runs.
type parentCtx job

func (c *parentCtx) Deadline() (time.Time, bool) { return c.parent.Deadline() }
func (c *parentCtx) Done() <-chan struct{}       { return c.parent.Done() }
func (c *parentCtx) Err() error                  { return c.parent.Err() }

func (c *parentCtx) Value(key any) any {
	if isGroupKey(key) {
		return c.g
	}
	if taskvalue.Is(key) {
		// A value that belongs to one task (a cluster permit's) is bound
		// above the task's run context: one found through Submit's context
		// is another task's, whose context this task was given.
		return nil
	}
	return c.parent.Value(key)
}

// AfterFunc is called by the standard context derived from c only when
// the parent is neither a standard context nor derived from one (found
// through Value): a parent with an AfterFunc method of its own is watched
// through it, as it would be without c between them; any other, by the
// goroutine context.AfterFunc starts, as it would be too.
func (c *parentCtx) AfterFunc(f func()) (stop func() bool) {
	if a, ok := c.parent.(interface{ AfterFunc(func()) func() bool }); ok {
		return a.AfterFunc(f)
	}
	return context.AfterFunc(c.parent, f)
}

// String is the parent's, so that the run context derived from it prints
// as it would without c between them.
func (c *parentCtx) String() string {
	if s, ok := c.parent.(fmt.Stringer); ok {
		return s.String()
	}
	return fmt.Sprintf("%T", c.parent)
}
