package httpadmit

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/groupexec/groupexec/breaker"
	"github.com/groupexec/groupexec/executor"
)

// RefusalStatus returns the status code the default refusal writer answers
// err with: 400 for ErrInvalidTenant; 503 for an open or half-open group
// breaker (breaker.ErrOpenState, breaker.ErrTooManyRequests), a shutdown
// (executor.ErrShutdown, executor.ErrGroupShutdown) or a context that ended
// while the request waited; 429 for every other executor.ErrRejected; 500
// for anything else.
func RefusalStatus(err error) int {
	code, _, _ := classify(err)
	return code
}

// classify returns what the default writer answers err with: the status,
// whether it carries Retry-After, and a short reason for the body.
func classify(err error) (code int, retry bool, reason string) {
	var re *executor.RejectedError
	switch {
	case errors.Is(err, ErrInvalidTenant):
		return http.StatusBadRequest, false, err.Error()
	case errors.Is(err, breaker.ErrOpenState), errors.Is(err, breaker.ErrTooManyRequests):
		return http.StatusServiceUnavailable, true, "the tenant's circuit breaker is open"
	case errors.Is(err, executor.ErrShutdown), errors.Is(err, executor.ErrGroupShutdown):
		return http.StatusServiceUnavailable, true, "shutting down"
	case errors.As(err, &re):
		return http.StatusTooManyRequests, true, "refused by the " + string(re.Limit) + " limit"
	case errors.Is(err, executor.ErrRejected):
		return http.StatusTooManyRequests, true, "refused"
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return http.StatusServiceUnavailable, false, "the request ended while it waited"
	}
	return http.StatusInternalServerError, false, "internal error"
}

// retryAfter formats d as Retry-After's whole seconds, rounded up.
func retryAfter(d time.Duration) string {
	return strconv.FormatInt(int64((d+time.Second-1)/time.Second), 10)
}

// writeRefusal is the default refusal writer: RefusalStatus's code, a
// Retry-After on 429 and on 503 for a shutdown or an open breaker, and a
// one-line text body.
func (h *handler) writeRefusal(w http.ResponseWriter, _ *http.Request, err error) {
	code, retry, reason := classify(err)
	if retry {
		w.Header().Set("Retry-After", h.retryAfter)
	}
	http.Error(w, reason, code)
}
