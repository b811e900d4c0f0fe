package grpcadmit

import (
	"errors"
	"math"
	"strconv"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
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
// a gRPC status other than OK, itself or an error it wraps, is sent with
// that status, its code, message and details unchanged (a wrapper's text
// stays in the server, in Err); one whose status is OK, which would tell the caller
// that the refused call succeeded, is sent as codes.Internal.
type RefusalError struct {
	Err      error // the reason for the refusal, as Unwrap returns it
	status   *status.Status
	pushback string // the grpc-retry-pushback-ms trailer a server sends; "" for none
	server   bool   // a server interceptor's: the call's handler never ran
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
	case adapt.Unavailable, adapt.InvalidTenant, adapt.InvalidWeight:
		if st := handlerStatus(err); st != nil && st.Code() != codes.OK {
			// A tenant or weight function's own answer, a status error
			// (Unauthenticated for a caller without credentials, say):
			// sent with its code, message and details, as a rejection
			// handler's is, and its retry the function's to tell.
			return &RefusalError{Err: err, status: st}
		}
	case adapt.Canceled:
		msg = "the call was cancelled while it waited"
	case adapt.DeadlineExceeded:
		msg = "the call's deadline passed while it waited"
	case adapt.Unknown:
		if st := handlerStatus(err); st != nil && st.Code() != codes.OK {
			// A rejection handler's own answer (executor.WithRejectionHandler),
			// with its code and details: Internal would tell the caller, and
			// its ClientFailure, that the server failed.
			// Its retry, too, is the handler's to tell: no pushback.
			return &RefusalError{Err: err, status: st}
		}
		// The server's own failure: its text (hosts, keys) stays here,
		// in Err, for the server's logs; httpadmit answers the same. So is
		// an error whose status is OK: sent as it is, it would tell the
		// caller that a call that never ran succeeded (and status.Err of
		// an OK status is nil, which Error would dereference).
		msg = "internal error"
	}
	st := status.New(codeOf(r), msg)
	if r.Retry() {
		if d, derr := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(retryAfter)}); derr == nil {
			st = d
		}
	}
	return &RefusalError{Err: err, status: st, pushback: pushback(r, retryAfter)}
}

// pushbackKey is the trailer gRPC's client retry policy reads (gRFC A6,
// grpc-go's shouldRetry): it does not read RetryInfo. A non-negative
// integer retries the call after that many milliseconds, whatever the
// policy's backoff; a negative one (or a malformed one) stops the retries.
// It is read only from a response of trailers alone, which every refusal
// is: the handler never ran, so no header was sent.
const pushbackKey = "grpc-retry-pushback-ms"

// pushback returns the grpc-retry-pushback-ms value of a refusal for r: the
// RetryInfo delay, in whole milliseconds rounded up (0 would retry at
// once) and at most maxPushback, where a later try may be admitted; -1
// where a retry would meet the same refusal (an invalid tenant or weight,
// a weight above a limit, a misconfigured server), so that a retry policy
// listing the code (ResourceExhausted, Internal) does not spend its
// attempts on it; none for a call whose context ended, which gRPC does not
// retry.
func pushback(r adapt.Reason, retryAfter time.Duration) string {
	switch r {
	case adapt.InvalidTenant, adapt.InvalidWeight, adapt.TooHeavy, adapt.Misconfigured:
		return "-1"
	}
	if !r.Retry() {
		return ""
	}
	ms := retryAfter / time.Millisecond
	if retryAfter%time.Millisecond > 0 {
		ms++ // rounded up without adding to retryAfter, which could overflow
	}
	return strconv.FormatInt(min(int64(ms), maxPushback), 10)
}

// maxPushback is the longest pushback sent, in milliseconds (about 24.8
// days): the longest that every gRPC client reads as a delay. grpc-java
// parses the value as an int, and stops retrying on a longer one; grpc-go
// multiplies it by a millisecond, which overflows past 2^63-1 ns into a
// negative delay, so that WithRetryAfter's longest Duration, meant as "not
// soon", retried at once. A client's deadline ends its wait long before.
const maxPushback = math.MaxInt32

// sendPushback sets, with set, the pushback trailer of a server's refusal
// err, and returns err.
func sendPushback(err error, set func(metadata.MD)) error {
	var re *RefusalError
	if errors.As(err, &re) && re.pushback != "" {
		set(metadata.Pairs(pushbackKey, re.pushback))
	}
	return err
}

// codeOf returns the code a refusal for r is sent with.
func codeOf(r adapt.Reason) codes.Code {
	switch r {
	case adapt.InvalidTenant, adapt.InvalidWeight:
		return codes.InvalidArgument
	case adapt.TooHeavy, adapt.Rejected:
		return codes.ResourceExhausted
	case adapt.Unavailable, adapt.BreakerOpen, adapt.Shutdown:
		return codes.Unavailable
	case adapt.Canceled:
		return codes.Canceled
	case adapt.DeadlineExceeded:
		return codes.DeadlineExceeded
	}
	return codes.Internal
}

// handlerStatus returns the gRPC status that err, or an error it wraps,
// carries, as that error gives it: status.FromError would make the whole
// chain's text the message of a wrapped one's, the wrapper's text (hosts,
// keys) included, which stays in the server.
func handlerStatus(err error) *status.Status {
	var se interface{ GRPCStatus() *status.Status }
	if !errors.As(err, &se) {
		return nil
	}
	return se.GRPCStatus()
}
