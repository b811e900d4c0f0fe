package httpadmit

import (
	"fmt"

	"github.com/groupexec/groupexec/internal/adapt"
)

// ErrInvalidTenant is matched by the error of a request whose tenant key
// breaks ValidTenant, or whose tenant function returned an error.
var ErrInvalidTenant = adapt.ErrInvalidTenant

// ErrInvalidWeight is matched by the error of a request whose weight
// function (WithWeightFunc) returned an error or a negative weight.
var ErrInvalidWeight = adapt.ErrInvalidWeight

// StatusError is the outcome, in the executor's Stats and listener events, of
// a request whose response status WithFailureStatus's function reported as a
// failure.
type StatusError struct {
	Code int // the response's status code
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("httpadmit: response status %d counted as a failure", e.Code)
}
