package grpcadmit

import (
	"context"
	"sync"

	"google.golang.org/grpc"

	"github.com/groupexec/groupexec/executor"
)

// UnaryClientInterceptor returns an interceptor that admits each outgoing
// unary call with ex.DoWeighted before sending it: by default one group per
// connection target (ClientConn.Target), so each dependency has its own
// bulkhead and a slow one cannot take all of the outgoing capacity. The
// target is the one the ClientConn was made with, as it was written: it is
// not resolved nor normalised, so two ClientConns that name one server
// differently ("localhost:50051", "dns:///localhost:50051") are two groups,
// each with limits of its own. Make one ClientConn per dependency and share
// it, as gRPC advises, or name the group with a tenant option. With
// WithTenantKey the group is the outgoing metadata's tenant, with
// WithTenantFunc what it returns. The call holds its slot until the reply
// (or error) is in. Its error counts as a failure for the group's breaker by
// ClientFailure, unless WithFailure says otherwise: a call that runs out of
// time is a failure of the dependency.
//
// A call the executor refuses is not sent: its error is a *RefusalError, with
// the code a server interceptor would send (codes.ResourceExhausted for lack
// of room) and matching executor.ErrRejected with errors.Is. So is a call
// whose context ended while it waited, or by the time it was admitted
// (its deadline passed by the clock, its context's timer not yet fired,
// too): a *RefusalError with codes.DeadlineExceeded or codes.Canceled, which
// counts as Cancelled, not as a failure of the dependency that never saw
// it. The call's own error is returned unchanged. It panics if ex is nil
// or an option is invalid.
func UnaryClientInterceptor(ex *executor.Executor, opts ...Option) grpc.UnaryClientInterceptor {
	a := newClientAdmitter(ex, opts)
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, callOpts ...grpc.CallOption) error {
		group, weight, err := a.outgoingCall(ctx, cc, method)
		if err != nil {
			return err
		}
		c := clientCalls.Get().(*clientCall)
		c.a, c.method, c.req, c.reply, c.cc, c.invoker, c.opts = a, method, req, reply, cc, invoker, callOpts
		err = a.ex.DoWeighted(ctx, group, weight, c.fn)
		cerr, ran, returned := c.err, c.ran, c.returned
		*c = clientCall{fn: c.fn} // drop the call before the next one reuses c
		clientCalls.Put(c)
		if !ran {
			return refusal(err, a.retryFor(err))
		}
		if !returned {
			return notReturned(err)
		}
		return cerr
	}
}

// newClientAdmitter is the admitter of the client interceptors: their
// refusals are a client's, and a call's error a failure by ClientFailure
// unless WithFailure says otherwise.
func newClientAdmitter(ex *executor.Executor, opts []Option) *admitter {
	a := newAdmitter(ex, opts, outgoing)
	a.client = true
	if a.failure == nil {
		a.failure = ClientFailure
	}
	return a
}

// outgoingCall returns the group and the weight of an outgoing call of
// method on cc: by default the group is cc's target, as written.
func (a *admitter) outgoingCall(ctx context.Context, cc *grpc.ClientConn, method string) (group string, weight int, err error) {
	if a.tenant == nil {
		group = cc.Target()
	} else if group, err = a.groupOf(ctx); err != nil {
		return "", 0, err
	}
	weight, err = a.weightOf(ctx, method)
	return group, weight, err
}

// A clientCall is one outgoing call's fn for Do and its outcome, pooled as
// unaryCall is: Do has returned, and fn will not run again, by the time one
// is put back; one whose invoker panicked is not put back.
type clientCall struct {
	a        *admitter
	method   string
	req      any
	reply    any
	cc       *grpc.ClientConn
	invoker  grpc.UnaryInvoker
	opts     []grpc.CallOption
	err      error
	ran      bool
	returned bool                        // run returned: neither the invoker nor WithFailure's function panicked
	fn       func(context.Context) error // run, bound to this call
}

var clientCalls = sync.Pool{New: func() any {
	c := new(clientCall)
	c.fn = c.run
	return c
}}

func (c *clientCall) run(ctx context.Context) error {
	c.ran = true
	if err := endedErr(ctx); err != nil {
		// Admitted as its context ended (its deadline passed as it left
		// the queue, or while a listener ran), or once its deadline passed
		// by the clock though the context's timer, late on a loaded
		// client, has not fired yet: gRPC would fail it at once, unsent,
		// with DeadlineExceeded, which ClientFailure counts against the
		// dependency. It is refused here instead, as if it had ended
		// while it waited.
		c.err = refusal(err, c.a.retryAfter)
		c.returned = true
		return errNotSent
	}
	c.err = c.invoker(ctx, c.method, c.req, c.reply, c.cc, c.opts...)
	outcome := c.a.outcome(c.err) // WithFailure's function may panic
	c.returned = true
	return outcome
}
