package grpcadmit

import (
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/groupexec/groupexec/internal/adapt"
)

// RefusalError is the error of a call an interceptor did not run. Its
// GRPCStatus is what the caller sees (status.Code and status.FromError read
// it); Unwrap gives the reason: an error matching executor.ErrRejected,
// httpadmit.ErrInvalidTenant or httpadmit.ErrInvalidWeight, the call
// context's error, or a rejection handler's own error
// (executor.WithRejectionHandler). A rejection handler's error that carries
// a gRPC status is sent with that status, its code and details unchanged.
type RefusalError struct {
	Err    error
	status *status.Status
}

// Error is the message of the gRPC status sent for the refusal.
func (e *RefusalError) Error() string { return e.status.Err().Error() }

// GRPCStatus returns the status sent for the refusal.
func (e *RefusalError) GRPCStatus() *status.Status { return e.status }

// Unwrap returns the reason for the refusal.
func (e *RefusalError) Unwrap() error { return e.Err }

// refusal returns the error for a call refused with err.
func refusal(err error, retryAfter time.Duration) error {
	r, msg := adapt.Classify(err)
	switch r {
	case adapt.Canceled:
		msg = "the call was cancelled while it waited"
	case adapt.DeadlineExceeded:
		msg = "the call's deadline passed while it waited"
	case adapt.Unknown:
		if st, ok := status.FromError(err); ok {
			// A rejection handler's own answer (executor.WithRejectionHandler),
			// with its code and details: Internal would tell the caller, and
			// its ClientFailure, that the server failed.
			return &RefusalError{Err: err, status: st}
		}
		// The server's own failure: its text (hosts, keys) stays here,
		// in Err, for the server's logs; httpadmit answers the same.
		msg = "internal error"
	}
	st := status.New(codeOf(r), msg)
	if r.Retry() {
		if d, derr := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(retryAfter)}); derr == nil {
			st = d
		}
	}
	return &RefusalError{Err: err, status: st}
}

// codeOf returns the code a refusal for r is sent with.
func codeOf(r adapt.Reason) codes.Code {
	switch r {
	case adapt.InvalidTenant, adapt.InvalidWeight:
		return codes.InvalidArgument
	case adapt.TooHeavy, adapt.Rejected:
		return codes.ResourceExhausted
	case adapt.BreakerOpen, adapt.Shutdown:
		return codes.Unavailable
	case adapt.Canceled:
		return codes.Canceled
	case adapt.DeadlineExceeded:
		return codes.DeadlineExceeded
	}
	return codes.Internal
}
