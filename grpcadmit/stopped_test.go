package grpcadmit_test

import (
	"context"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/groupexec/groupexec/breaker"
	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/grpcadmit"
	"github.com/groupexec/groupexec/policy"
)

// A call that the executor stops as it runs (Close, ShutdownGroup's
// deadline), whose handler answers its context's cancellation as
// handlers do (ctx.Err(), or its status), reaches its caller as
// codes.Unavailable with RetryInfo and a pushback, as a call the shutdown
// refused does: sent as it was, Canceled told a caller that never
// cancelled that it had, and its retry policy, which retries Unavailable
// on another server, did not retry it. The call still counts as
// Cancelled, and an interceptor chained before this one, on an executor
// of its own, counts it Cancelled too: its breaker stays closed.
func TestExecutorStopIsUnavailable(t *testing.T) {
	outer := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(8)}, tripOnFirstFailure)
	for _, tc := range []struct {
		name string
		stop func(ex *executor.Executor)
	}{
		{"Close", func(ex *executor.Executor) { ex.Close() }},
		{"ShutdownGroup", func(ex *executor.Executor) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel() // no wait: the group's running calls are cancelled at once
			ex.ShutdownGroup(ctx, "a")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev := newEvents()
			ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(8)}, ev.listener())
			g := newGate()
			g.reply = func(ctx context.Context, in string) error {
				<-ctx.Done()
				if in == "status" {
					return status.FromContextError(ctx.Err()).Err()
				}
				return ctx.Err()
			}
			cc := dial(t, start(t, g,
				grpc.ChainUnaryInterceptor(grpcadmit.UnaryServerInterceptor(outer, grpcadmit.WithTenantKey("outer")),
					grpcadmit.UnaryServerInterceptor(ex)),
				grpc.ChainStreamInterceptor(grpcadmit.StreamServerInterceptor(outer, grpcadmit.WithTenantKey("outer")),
					grpcadmit.StreamServerInterceptor(ex))))
			ctx := metadata.AppendToOutgoingContext(context.Background(), "x-tenant", "a", "outer", "o-"+tc.name)
			errs := make(chan error, 3)
			trailers := make(chan metadata.MD, 3)
			for _, v := range []string{"err", "status"} {
				go func() {
					var tr metadata.MD
					err := cc.Invoke(ctx, "/test.Gate/Call", wrapperspb.String(v), new(wrapperspb.StringValue), grpc.Trailer(&tr))
					trailers <- tr
					errs <- err
				}()
				<-g.entered
			}
			s, err := cc.NewStream(ctx, &gateDesc.Streams[1], "/test.Gate/Wait") // answers the status
			if err != nil {
				t.Fatal(err)
			}
			s.CloseSend()
			<-g.entered
			go func() {
				err := s.RecvMsg(new(wrapperspb.StringValue))
				trailers <- s.Trailer()
				errs <- err
			}()
			tc.stop(ex)
			for range 3 {
				err, tr := <-errs, <-trailers
				if status.Code(err) != codes.Unavailable || retryDelay(err) != grpcadmit.DefaultRetryAfter {
					t.Errorf("a call the executor stopped: %v (RetryInfo %v), want Unavailable with RetryInfo", err, retryDelay(err))
				}
				if v := tr.Get("grpc-retry-pushback-ms"); len(v) != 1 || v[0] != "1000" {
					t.Errorf("pushback %q, want 1000", v)
				}
				if e := <-ev.completed; e.Status != executor.Cancelled {
					t.Errorf("the call counted %v (%v), want Cancelled", e.Status, e.Err)
				}
			}
			if st, _ := outer.GroupStats("o-" + tc.name); st.Failed != 0 || st.Breaker != breaker.StateClosed {
				t.Errorf("outer group: %d failed, breaker %v; want 0 and closed", st.Failed, st.Breaker)
			}
		})
	}
}

// A cancellation the handler answers while the executor runs it (the
// caller went away, or the handler's own work was cancelled) is returned
// as it is.
func TestCallerCancellationIsKept(t *testing.T) {
	ex := newExec(t, nil)
	ctx, cancel := context.WithCancel(metadata.NewIncomingContext(context.Background(), metadata.Pairs("x-tenant", "a")))
	_, err := grpcadmit.UnaryServerInterceptor(ex)(ctx, nil, nil, func(ctx context.Context, _ any) (any, error) {
		cancel()
		<-ctx.Done()
		return nil, ctx.Err()
	})
	if err != context.Canceled {
		t.Errorf("caller's cancellation: %v, want context.Canceled", err)
	}
	own := status.Error(codes.Canceled, "the handler's own work was cancelled")
	_, err = grpcadmit.UnaryServerInterceptor(ex)(context.Background(), nil, nil, func(context.Context, any) (any, error) {
		return nil, own
	})
	if err != own {
		t.Errorf("the handler's own Canceled: %v, want it unchanged", err)
	}
}
