package httpadmit

import (
	"context"
	"fmt"

	"github.com/groupexec/groupexec/internal/adapt"
)

// ErrInvalidTenant is matched by the error of a request whose tenant key
// breaks ValidTenant, or whose tenant function returned an error other than
// one matching ErrUnavailable.
var ErrInvalidTenant = adapt.ErrInvalidTenant

// ErrInvalidWeight is matched by the error of a request whose weight
// function (WithWeightFunc) returned a negative weight, or an error other
// than one matching ErrUnavailable.
var ErrInvalidWeight = adapt.ErrInvalidWeight

// ErrUnavailable, wrapped in the error of a tenant function (WithTenantFunc)
// or a weight function (WithWeightFunc), says that the server, not the
// request, failed: the function could not read the request's tenant or
// weight (a lookup it needs is down). Handler's default refusal writer
// answers 503 Service Unavailable with Retry-After, and without the
// error's text, where any other error of the function's is the request's
// fault, 400. The request's error is the function's as it is, matching
// neither ErrInvalidTenant nor ErrInvalidWeight.
//
//	id, err := accounts.Lookup(r.Context(), r.Header.Get("Authorization"))
//	if err != nil {
//		return "", fmt.Errorf("%w: %w", httpadmit.ErrUnavailable, err)
//	}
var ErrUnavailable = adapt.ErrUnavailable

// StatusError is the outcome, in the executor's Stats and listener events, of
// a request whose response status WithFailureStatus's function reported as a
// failure. When the status was written after the request's context was
// cancelled (its client went away, or the executor stopped it), the request
// counts as Cancelled instead, and its outcome matches context.Canceled and
// carries the StatusError (errors.As).
type StatusError struct {
	Code int // the response's status code
}

// Error gives the status code counted as a failure.
func (e *StatusError) Error() string {
	return fmt.Sprintf("httpadmit: response status %d counted as a failure", e.Code)
}

// cancelledStatusError is the outcome of a request whose failing status was
// written after its context was cancelled: Cancelled, since the status
// answered for work given up on.
type cancelledStatusError struct{ status *StatusError }

func (e *cancelledStatusError) Error() string {
	return fmt.Sprintf("httpadmit: response status %d written after the request was cancelled", e.status.Code)
}

// Unwrap returns the status and context.Canceled.
func (e *cancelledStatusError) Unwrap() []error { return []error{e.status, context.Canceled} }
