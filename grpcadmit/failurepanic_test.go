package grpcadmit_test

import (
	"context"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/grpcadmit"
	"github.com/groupexec/groupexec/internal/adaptertest"
	"github.com/groupexec/groupexec/policy"
)

// A panic in WithFailure's function, as it judges a unary call's or a
// server stream's error, goes on to the interceptor's caller, as a
// handler's (an invoker's) does, whether the call was admitted or a
// rejection handler ran it in its caller (Rejection.RunInCaller), which
// recovers what fn raises into a *executor.PanicError: the call was
// judged by nobody, and is not answered as if it had been.
func TestFailurePanicGoesOnToTheCaller(t *testing.T) {
	failing := status.Error(codes.Internal, "broken")
	opts := []grpcadmit.Option{
		grpcadmit.WithTenantFunc(func(context.Context) (string, error) { return "a", nil }),
		grpcadmit.WithFailure(func(error) bool { panic("judge broke") }),
	}
	calls := map[string]func(ex *executor.Executor){
		"unary server": func(ex *executor.Executor) {
			grpcadmit.UnaryServerInterceptor(ex, opts...)(context.Background(), "req", &grpc.UnaryServerInfo{FullMethod: "/t.S/M"},
				func(context.Context, any) (any, error) { return nil, failing })
		},
		"stream server": func(ex *executor.Executor) {
			grpcadmit.StreamServerInterceptor(ex, opts...)(nil, fakeStream{ctx: context.Background()}, &grpc.StreamServerInfo{FullMethod: "/t.S/M"},
				func(any, grpc.ServerStream) error { return failing })
		},
		"unary client": func(ex *executor.Executor) {
			grpcadmit.UnaryClientInterceptor(ex, opts...)(context.Background(), "/t.S/M", nil, nil, nil,
				func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error { return failing })
		},
	}
	for name, call := range calls {
		for _, inCaller := range []bool{false, true} {
			t.Run(name+map[bool]string{false: "/admitted", true: "/run in caller"}[inCaller], func(t *testing.T) {
				ex := newExec(t, []policy.Option{policy.WithDefaultMaxInFlight(1)})
				if inCaller {
					ex = runInCallerExec(t)
					defer adaptertest.FillSlot(t, ex, "a")()
				}
				recovered, returned := recovering(func() { call(ex) })
				if recovered != "judge broke" {
					t.Errorf("the caller recovered %v (returned %v), want the WithFailure function's panic", recovered, returned)
				}
			})
		}
	}
}
