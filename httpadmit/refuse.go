package httpadmit

import (
	"net/http"
	"strconv"
	"time"

	"github.com/groupexec/groupexec/internal/adapt"
)

// RefusalStatus returns the status code the default refusal writer answers
// err with: 400 for ErrInvalidTenant and ErrInvalidWeight; 503 for
// ErrUnavailable (a tenant or weight function's lookup failed); 413 for a weight
// above a limit (executor.ErrTooHeavy); 500 for a limit resolver's invalid
// value (executor.LimitResolver) or an invalid task (executor.LimitInvalid),
// the server's misconfiguration; 503 for an open or half-open group
// breaker (breaker.ErrOpenState, breaker.ErrTooManyRequests), a shutdown
// (executor.ErrShutdown, executor.ErrGroupShutdown) or a context that ended
// while the request waited; 429 for every other executor.ErrRejected; 500
// for anything else.
func RefusalStatus(err error) int {
	r, _ := adapt.Classify(err)
	return statusOf(r)
}

func statusOf(r adapt.Reason) int {
	switch r {
	case adapt.InvalidTenant, adapt.InvalidWeight:
		return http.StatusBadRequest
	case adapt.TooHeavy:
		return http.StatusRequestEntityTooLarge
	case adapt.Unavailable, adapt.BreakerOpen, adapt.Shutdown, adapt.Canceled, adapt.DeadlineExceeded:
		return http.StatusServiceUnavailable
	case adapt.Rejected:
		return http.StatusTooManyRequests
	}
	return http.StatusInternalServerError
}

// retryAfter formats d as Retry-After's whole seconds, rounded up.
func retryAfter(d time.Duration) string {
	s := d / time.Second
	if d%time.Second > 0 {
		s++ // rounded up without adding to d, which could overflow
	}
	return strconv.FormatInt(int64(s), 10)
}

// writeRefusal is the default refusal writer: RefusalStatus's code, a
// Retry-After on 429 and on 503 for a shutdown, an open breaker or a
// tenant or weight function's ErrUnavailable, and a
// one-line text body naming the cause. The Retry-After of a refusal by an
// open group breaker is the time it has left before it lets a probe
// through, when that is longer than WithRetryAfter's: a client told to come
// back sooner would only be refused again.
func (h *handler) writeRefusal(w http.ResponseWriter, _ *http.Request, err error) {
	r, reason := adapt.Classify(err)
	switch r {
	case adapt.Canceled, adapt.DeadlineExceeded:
		reason = "the request ended while it waited"
	case adapt.Unknown:
		reason = "internal error"
	}
	if r.Retry() {
		ra := h.retryAfter
		if r == adapt.BreakerOpen {
			if d := adapt.RetryDelay(h.ex, err, h.retryDelay); d != h.retryDelay {
				ra = retryAfter(d)
			}
		}
		w.Header().Set("Retry-After", ra)
	}
	http.Error(w, reason, statusOf(r))
}
