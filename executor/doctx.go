package executor

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/groupexec/groupexec/internal/taskvalue"
)

// doCtx is the run context of a Do call, unless its context is
// context.Background and it runs within the limits (then its group's), or
// a cluster permit is bound. It is the call's task (runCtx) while the call
// runs, and answers alone, from the call's context, once the call has
// ended, so that the task can go back to doTaskPool even though fn may
// have kept its context: only this small object (32 B) is allocated per
// call, not the task (128 B). In the server workload with a cancellable
// context (2-core machine, six alternating rounds) that took Do from 1.60x
// x/sync's time to 1.37x at GOMAXPROCS 2, and from 1.45x to 1.36x at 1.
//
// A kept context's Done must return the channel it handed out while the
// call ran, so a call whose fn asked for Done keeps its task (ctxKept) for
// its context to go on using; so is, for the moment, one whose end finds a
// method using the task: it is left to the collector.
type doCtx struct {
	parent context.Context
	j      *job
	// state is ctxEnded, ctxKept, the answer Err settled on after the
	// end, and ctxUser times the number of methods using j: none once the
	// call has ended, unless j is kept.
	state atomic.Int32
}

const (
	ctxEnded       int32 = 1 << iota // the call has ended
	ctxKept                          // j is not reused: methods may use it after the end
	ctxErrCanceled                   // Err answers context.Canceled from now on (errEnded)
	ctxErrParent                     // Err answers the parent's error from now on
	ctxUser                          // one method using j
)

// enter counts a method that uses j, and reports whether it may: not once
// the call has ended and j may be reused. keep marks j kept.
func (c *doCtx) enter(keep bool) bool {
	for {
		s := c.state.Load()
		if s&(ctxEnded|ctxKept) == ctxEnded {
			return false
		}
		n := s + ctxUser
		if keep {
			n |= ctxKept
		}
		if c.state.CompareAndSwap(s, n) {
			return true
		}
	}
}

// exit uncounts a method.
func (c *doCtx) exit() { c.state.Add(-ctxUser) }

// end marks the call ended, and reports whether its task may be reused:
// no method has used it for Done, and none is using it now. Otherwise it
// makes the task's extra, for the endRun that follows to mark the run
// ended: a method under way, that counted itself in before the end, may
// reach the task only after the call has returned, and must then answer
// as after the end (a Done that made its channel then would leave it open
// once Do has returned). The task of a call whose group has stopped is
// kept too, so that the context goes on reporting the stop's cause
// (runCtx.Value); a stop is rare.
func (c *doCtx) end() bool {
	if c.j.g.stop.Load() != nil {
		c.state.Or(ctxKept)
	}
	if c.state.Or(ctxEnded) == 0 {
		return true
	}
	c.j.extra()
	return false
}

func (c *doCtx) Deadline() (time.Time, bool) { return c.parent.Deadline() }

// Value is the task's (runCtx.Value) while the call runs. Once it has
// ended, GroupFromContext's key finds nothing. context.Cause's lookup
// (causeKey) follows Err's answer, which it settles if Err has not: the
// parent's cause if that answer is the parent's error, else the stop's
// cause if the group's stop cancelled the context, else the end's
// cancelled context, as for a context derived with a cancel deferred by
// the call. A cause the parent gets after the context was done is not its
// cause, as it is not a derived context's.
func (c *doCtx) Value(key any) any {
	if key == causeKey {
		return c.causeValue()
	}
	if c.enter(false) {
		v := (*runCtx)(c.j).Value(key)
		c.exit()
		return v
	}
	if isGroupKey(key) || taskvalue.Is(key) {
		// The task, which knew the group, may serve another call now; the
		// parent must not answer for it (an enclosing task's group, or
		// its cluster permits: parentCtx.Value).
		return nil
	}
	return c.parent.Value(key)
}

// causeValue is Value for context.Cause's key.
func (c *doCtx) causeValue() any {
	if c.Err() == nil || c.state.Load()&ctxErrParent != 0 {
		return c.parent.Value(causeKey)
	}
	// Cancelled on its own: by the group's stop (always, while the call
	// runs), or by the end.
	if c.enter(false) {
		s := c.j.stoppedBy()
		c.exit()
		if s != nil {
			return s.ctx.Value(causeKey)
		}
	}
	return endedCtx.Value(causeKey)
}

// causeKey is the key that context.Cause asks a done context's Value for,
// to find the standard context that holds its cause: the one lookup it
// makes, once Err has answered an error.
var causeKey = func() any {
	var p keyProbe
	_ = context.Cause(&p)
	return p.key
}()

// keyProbe is a context that records the key its Value was asked for.
type keyProbe struct{ key any }

func (*keyProbe) Deadline() (time.Time, bool) { return time.Time{}, false }
func (*keyProbe) Done() <-chan struct{}       { return nil }
func (*keyProbe) Err() error                  { return context.Canceled }
func (p *keyProbe) Value(key any) any {
	p.key = key
	return nil
}

// endedCtx is a context cancelled at once: it answers context.Cause's
// lookup for a Do context whose call has ended (doCtx.Value).
var endedCtx = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()

func (c *doCtx) Done() <-chan struct{} {
	if !c.enter(true) {
		return closedChan // ended, and no channel was handed out
	}
	defer c.exit()
	return (*runCtx)(c.j).Done()
}

// Err is the parent's error first, as for a derived context, until it has
// answered an error: that answer stays (settle), so a stop of the group
// that cancelled the context before its parent ended keeps its answer, as
// a derived context keeps its first cancel's. If Done has handed out a
// channel, the parent's end closes it only through a function run once the
// parent has ended (context.AfterFunc), a moment later: Err cancels it
// itself first, so that Err and Done agree, as a context derived from the
// parent is cancelled with it.
func (c *doCtx) Err() error {
	if c.state.Load()&(ctxErrCanceled|ctxErrParent) != 0 {
		return c.errEnded() // settled
	}
	perr := c.parent.Err()
	var cause error
	if perr != nil {
		if c.state.Load()&(ctxEnded|ctxKept) == 0 {
			// No channel: Done, if asked now, reads the parent first too.
			return c.settle(ctxErrParent)
		}
		cause = context.Cause(c.parent) // user code (Value): before enter
	}
	if !c.enter(false) {
		return c.errEnded() // no channel was handed out
	}
	if perr != nil {
		c.j.cancelContext(cause)
	}
	err := (*runCtx)(c.j).errOwn()
	if c.state.Add(-ctxUser)&ctxEnded != 0 && err != nil {
		// Done's channel is closed (errOwn reads it, and the end, under
		// the lock that closes it): the answer is the end's.
		return c.errEnded()
	}
	if perr != nil {
		return c.settle(ctxErrParent) // and Done is closed
	}
	if err != nil {
		return c.settle(ctxErrCanceled) // the group's stop
	}
	return nil
}

// settle makes Err answer as answer says (ctxErrCanceled or ctxErrParent)
// from now on, unless an answer was settled before, and returns the
// settled answer.
func (c *doCtx) settle(answer int32) error {
	for {
		s := c.state.Load()
		if s&(ctxErrCanceled|ctxErrParent) != 0 || c.state.CompareAndSwap(s, s|answer) {
			return c.errEnded()
		}
	}
}

// errEnded is Err once the call has ended and fn's context is done: the
// parent's error if it has one by the first time Err is asked, else
// context.Canceled, as for a context that fn derived and cancelled on
// return. The first answer stays, even if the parent ends later: after
// Err returns an error, successive calls return the same one. It is also
// the answer Err settled on while the call ran (settle).
func (c *doCtx) errEnded() error {
	for {
		s := c.state.Load()
		switch {
		case s&ctxErrCanceled != 0:
			return context.Canceled
		case s&ctxErrParent != 0:
			return c.parent.Err()
		}
		err, n := c.parent.Err(), s|ctxErrCanceled
		if err != nil {
			n = s | ctxErrParent
		}
		if c.state.CompareAndSwap(s, n) {
			if err == nil {
				return context.Canceled
			}
			return err
		}
	}
}

func (c *doCtx) String() string { return "executor.taskContext()" }
