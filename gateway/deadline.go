package gateway

import (
	"context"
	"errors"
	"time"

	"github.com/groupexec/groupexec/gateway/config"
)

// heldToDeadline reports whether a backend given a request now, with
// ctx's deadline, is held to that deadline: whether missing it is a
// failure of the backend's breaker, and of the tenant's. It is when the
// backend has at least half of timeouts.upstream (timeout) before the
// deadline. The deadline counts from the end of the request's body, and
// the wait in its tenant's queue (unbounded without limits.queue_timeout),
// the earlier tries and their backoffs take from it: a request admitted a
// moment before its deadline gets a 504 whatever the backend does, and
// counted against it, a queue grown long under one tenant's load would
// open the tenant's breaker, or the backend's for every tenant, though the
// backend answers as fast as ever.
//
// The time is the real one, as the deadline's. ctx without a deadline
// holds the backend to none that could pass.
func heldToDeadline(ctx context.Context, timeout time.Duration) bool {
	dl, ok := ctx.Deadline()
	return !ok || time.Until(dl) >= timeout/2
}

// deadlinePassed reports whether ctx's deadline has passed: ctx ended with
// context.DeadlineExceeded, or it has not ended and the clock is past its
// deadline. A context's timer fires late on a loaded machine, while what
// the deadline cut may come back first with an error of its own: a dial
// given the deadline times out by the poller's timer, and a backend given
// it (a proxy's timeout header) breaks its answer off. Read as the
// backend's error, a request past its deadline was answered 502, and the
// backend failed, held to the deadline or not (heldToDeadline); read now,
// it is the deadline passing, as once the timer has fired. A context
// cancelled otherwise (the client went away, the drain) has not passed
// its deadline, whatever the clock says.
func deadlinePassed(ctx context.Context) bool {
	if err := ctx.Err(); err != nil {
		return errors.Is(err, context.DeadlineExceeded)
	}
	return pastDeadline(ctx)
}

// over reports whether ctx has ended, whatever the cause, or its deadline
// has passed by the clock (deadlinePassed).
func over(ctx context.Context) bool { return ctx.Err() != nil || pastDeadline(ctx) }

// pastDeadline reports whether the clock is past ctx's deadline.
func pastDeadline(ctx context.Context) bool {
	dl, ok := ctx.Deadline()
	return ok && !time.Now().Before(dl)
}

// timeoutsKey is the context key of the timeouts a request's deadline was
// set from (withTimeouts).
type timeoutsKey struct{}

// withTimeouts returns ctx telling t, the timeouts of the config the
// request arrived with, to the transport. The transport reads the backends
// and their breakers as they are now, but a try is judged against the
// timeouts.upstream the request's deadline was set from (heldToDeadline):
// judged by a reload's, the backend's breaker counted a deadline that the
// tenant's (judged by the request's own) did not, or the other way round.
func withTimeouts(ctx context.Context, t *config.Timeouts) context.Context {
	return context.WithValue(ctx, timeoutsKey{}, t)
}

// timeoutsOf returns the timeouts withTimeouts gave ctx, or def if none.
func timeoutsOf(ctx context.Context, def *config.Timeouts) *config.Timeouts {
	if t, ok := ctx.Value(timeoutsKey{}).(*config.Timeouts); ok {
		return t
	}
	return def
}
