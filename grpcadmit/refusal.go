package grpcadmit

import (
	"context"
	"errors"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/groupexec/groupexec/breaker"
	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/httpadmit"
)

// RefusalError is the error of a call an interceptor did not run. Its
// GRPCStatus is what the caller sees (status.Code and status.FromError read
// it); Unwrap gives the reason: an error matching executor.ErrRejected or
// httpadmit.ErrInvalidTenant, or the call context's error.
type RefusalError struct {
	Err    error
	status *status.Status
}

func (e *RefusalError) Error() string { return e.status.Err().Error() }

// GRPCStatus returns the status sent for the refusal.
func (e *RefusalError) GRPCStatus() *status.Status { return e.status }

// Unwrap returns the reason for the refusal.
func (e *RefusalError) Unwrap() error { return e.Err }

// refusal returns the error for a call refused with err.
func refusal(err error, retryAfter time.Duration) error {
	code, retry, msg := classify(err)
	st := status.New(code, msg)
	if retry {
		if d, derr := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(retryAfter)}); derr == nil {
			st = d
		}
	}
	return &RefusalError{Err: err, status: st}
}

// classify returns the code for a refusal, whether it carries RetryInfo,
// and its message.
func classify(err error) (code codes.Code, retry bool, msg string) {
	var re *executor.RejectedError
	switch {
	case errors.Is(err, httpadmit.ErrInvalidTenant):
		return codes.InvalidArgument, false, err.Error()
	case errors.Is(err, breaker.ErrOpenState), errors.Is(err, breaker.ErrTooManyRequests):
		return codes.Unavailable, true, "the tenant's circuit breaker is open"
	case errors.Is(err, executor.ErrShutdown), errors.Is(err, executor.ErrGroupShutdown):
		return codes.Unavailable, true, "shutting down"
	case errors.As(err, &re):
		return codes.ResourceExhausted, true, "refused by the " + string(re.Limit) + " limit"
	case errors.Is(err, executor.ErrRejected):
		return codes.ResourceExhausted, true, "refused"
	case errors.Is(err, context.Canceled):
		return codes.Canceled, false, "the call was cancelled while it waited"
	case errors.Is(err, context.DeadlineExceeded):
		return codes.DeadlineExceeded, false, "the call's deadline passed while it waited"
	}
	return codes.Internal, false, err.Error()
}
