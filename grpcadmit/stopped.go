package grpcadmit

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/groupexec/groupexec/executor"
)

// answer returns err, the error a handler returned for a call with
// context ctx (gRPC's, not the one Do gave), as the caller is to get it.
// stopped says that Do's context had ended when the handler returned. A
// cancellation (context.Canceled, or the code Canceled) answered once the
// executor stopped the call (Close, ShutdownGroup's deadline), while the
// caller had not cancelled it, is the server going away: it is sent as
// codes.Unavailable with RetryInfo and its pushback (set with set), as a
// call the shutdown refused is. Sent as it is, Canceled would tell a
// caller that never cancelled that it had, and a retry policy, which
// retries Unavailable (on another server) and never Canceled, would give
// up on the call. Any other error, or one whose caller has gone, is
// returned unchanged.
func (a *admitter) answer(ctx context.Context, stopped bool, err error, set func(metadata.MD)) error {
	if !stopped || err == nil || ctx.Err() != nil {
		return err
	}
	if !errors.Is(err, context.Canceled) && status.Code(err) != codes.Canceled {
		return err
	}
	r := refusal(executor.ErrShutdown, a.retryAfter).(*RefusalError)
	set(metadata.Pairs(pushbackKey, r.pushback))
	return &stoppedError{err: err, refusal: r}
}

// stoppedError is the error of a call that the executor stopped, whose
// handler answered its cancellation (answer). Its GRPCStatus is a
// shutdown's refusal's (codes.Unavailable, RetryInfo); Unwrap gives the
// handler's error, and context.Canceled, so that an interceptor chained
// before this one counts the call as Cancelled too, not as the failure
// its code would say.
type stoppedError struct {
	err     error
	refusal *RefusalError // the status and pushback sent
}

func (e *stoppedError) Error() string              { return e.refusal.Error() }
func (e *stoppedError) GRPCStatus() *status.Status { return e.refusal.GRPCStatus() }
func (e *stoppedError) Unwrap() []error            { return []error{e.err, context.Canceled} }
