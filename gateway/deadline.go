package gateway

import (
	"context"
	"time"
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
