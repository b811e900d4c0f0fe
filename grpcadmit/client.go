package grpcadmit

import (
	"context"

	"google.golang.org/grpc"

	"github.com/groupexec/groupexec/executor"
)

// UnaryClientInterceptor returns an interceptor that admits each outgoing
// unary call with ex.Do before sending it: by default one group per
// connection target (ClientConn.Target), so each dependency has its own
// bulkhead and a slow one cannot take all of the outgoing capacity. With
// WithTenantKey the group is the outgoing metadata's tenant, with
// WithTenantFunc what it returns. The call holds its slot until the reply
// (or error) is in.
//
// A call the executor refuses is not sent: its error is a *RefusalError, with
// the code a server interceptor would send (codes.ResourceExhausted for lack
// of room) and matching executor.ErrRejected with errors.Is. The call's own
// error is returned unchanged. It panics if ex is nil or an option is
// invalid.
func UnaryClientInterceptor(ex *executor.Executor, opts ...Option) grpc.UnaryClientInterceptor {
	a := newAdmitter(ex, opts, outgoing)
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, callOpts ...grpc.CallOption) error {
		group := cc.Target()
		if a.tenant != nil {
			var err error
			if group, err = a.groupOf(ctx); err != nil {
				return err
			}
		}
		ran := false
		var cerr error
		err := a.ex.Do(ctx, group, func(ctx context.Context) error {
			ran = true
			cerr = invoker(ctx, method, req, reply, cc, callOpts...)
			return a.outcome(cerr)
		})
		if !ran {
			return refusal(err, a.retryAfter)
		}
		return cerr
	}
}
