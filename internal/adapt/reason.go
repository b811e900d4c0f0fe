package adapt

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/groupexec/groupexec/breaker"
	"github.com/groupexec/groupexec/executor"
)

// A Reason is why an adapter did not pass a request on, read from the error
// that stopped it.
type Reason int

// The reasons, in the order Classify tests them.
const (
	Unknown          Reason = iota // an error none of the others match
	Unavailable                    // ErrUnavailable: a tenant or weight function could not read the request, the server's failure
	InvalidTenant                  // ErrInvalidTenant
	InvalidWeight                  // ErrInvalidWeight
	TooHeavy                       // executor.ErrTooHeavy: the weight exceeds a limit, so it can never run
	Misconfigured                  // executor.LimitResolver, LimitInvalid: the server's fault, which a retry meets again
	BreakerOpen                    // breaker.ErrOpenState, breaker.ErrTooManyRequests
	Shutdown                       // executor.ErrShutdown, executor.ErrGroupShutdown
	Rejected                       // any other executor.ErrRejected: no room, a queue timeout, a cluster limiter
	Canceled                       // context.Canceled: the request's context ended while it waited
	DeadlineExceeded               // context.DeadlineExceeded, likewise
)

// Retry reports whether a client may retry a request refused for r later
// with some chance of success: the adapters then send a retry delay.
func (r Reason) Retry() bool {
	return r == Unavailable || r == BreakerOpen || r == Shutdown || r == Rejected
}

// Classify returns why err stopped a request, and a short message saying it
// (err's own text for an invalid request, a fixed one for Unavailable, the limit's name for a refusal
// and for a misconfiguration). The messages of Canceled, DeadlineExceeded
// and Unknown are left to the adapter, which knows what to call its request.
func Classify(err error) (Reason, string) {
	var re *executor.RejectedError
	switch {
	case errors.Is(err, ErrUnavailable):
		// Tested first: a function's error may wrap it in anything. Its
		// text (a lookup's address, a database's message) stays in the
		// server, as an Unknown error's does.
		return Unavailable, "the request's tenant or weight could not be read"
	case errors.Is(err, ErrInvalidTenant):
		return InvalidTenant, err.Error()
	case errors.Is(err, ErrInvalidWeight):
		return InvalidWeight, err.Error()
	case errors.Is(err, executor.ErrTooHeavy) && errors.As(err, &re):
		return TooHeavy, fmt.Sprintf("the weight %d exceeds the %s limit (%d)", re.Weight, re.Limit, re.Max)
	case errors.As(err, &re) && (re.Limit == executor.LimitResolver || re.Limit == executor.LimitInvalid):
		// The value or the task is invalid only through the server's
		// configuration or code, never through the request, which the
		// adapters checked: its text is for the server's log.
		return Misconfigured, "internal error (" + string(re.Limit) + ")"
	case errors.Is(err, breaker.ErrOpenState), errors.Is(err, breaker.ErrTooManyRequests):
		return BreakerOpen, "the circuit breaker is open" // a tenant's, or in a client interceptor a dependency's
	case errors.Is(err, executor.ErrShutdown), errors.Is(err, executor.ErrGroupShutdown):
		return Shutdown, "shutting down"
	case errors.As(err, &re):
		return Rejected, "refused by the " + string(re.Limit) + " limit"
	case errors.Is(err, executor.ErrRejected):
		return Rejected, "refused"
	case errors.Is(err, context.Canceled):
		return Canceled, ""
	case errors.Is(err, context.DeadlineExceeded):
		return DeadlineExceeded, ""
	}
	return Unknown, ""
}

// RetryDelay returns the retry delay of a request refused with err by ex:
// d (the adapter's WithRetryAfter), or longer for a refusal by an open
// group breaker, the time the breaker has left before it lets a probe
// through (Executor.BreakerRemainingDelay, which takes no lock), so that a
// client told to wait is not refused again for the rest of the breaker's
// Timeout.
func RetryDelay(ex *executor.Executor, err error, d time.Duration) time.Duration {
	var re *executor.RejectedError
	if !errors.As(err, &re) || re.Limit != executor.LimitBreaker || !errors.Is(re.Err, breaker.ErrOpenState) {
		return d
	}
	return max(d, ex.BreakerRemainingDelay(re.Group))
}

// Refused reports whether err is, or wraps, a refusal in this process by an
// executor or a circuit breaker (executor.ErrRejected, breaker.ErrOpenState,
// breaker.ErrTooManyRequests): work that never reached the dependency it
// was for, whose breaker must not count it.
func Refused(err error) bool {
	return errors.Is(err, executor.ErrRejected) || errors.Is(err, breaker.ErrOpenState) ||
		errors.Is(err, breaker.ErrTooManyRequests)
}
