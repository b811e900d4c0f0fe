package grpcadmit_test

import (
	"context"
	"testing"

	"google.golang.org/grpc"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/grpcadmit"
	"github.com/groupexec/groupexec/internal/adaptertest"
	"github.com/groupexec/groupexec/policy"
)

func runInCallerExec(t *testing.T) *executor.Executor {
	return newExec(t, []policy.Option{policy.WithDefaultMaxInFlight(1)},
		executor.WithRejectionHandler(func(r *executor.Rejection) error {
			r.RunInCaller()
			return nil
		}))
}

// A unary handler that panics while run in the caller by a rejection
// handler must not be answered as a success.
func TestUnaryPanicRunInCallerIsNotASuccess(t *testing.T) {
	ex := runInCallerExec(t)
	defer adaptertest.FillSlot(t, ex, "a")()
	icp := grpcadmit.UnaryServerInterceptor(ex, grpcadmit.WithTenantFunc(func(context.Context) (string, error) { return "a", nil }))
	var resp any
	var err error
	panicked := func() (v any) {
		defer func() { v = recover() }()
		resp, err = icp(context.Background(), "req", &grpc.UnaryServerInfo{FullMethod: "/t.S/M"},
			func(context.Context, any) (any, error) { panic("boom") })
		return nil
	}()
	if panicked == nil && err == nil {
		t.Fatalf("handler panicked; interceptor returned resp %v, err nil: a success", resp)
	}
}

// Likewise for a stream handler: a nil error is an OK status.
func TestStreamPanicRunInCallerIsNotASuccess(t *testing.T) {
	ex := runInCallerExec(t)
	defer adaptertest.FillSlot(t, ex, "a")()
	icp := grpcadmit.StreamServerInterceptor(ex, grpcadmit.WithTenantFunc(func(context.Context) (string, error) { return "a", nil }))
	var err error
	panicked := func() (v any) {
		defer func() { v = recover() }()
		err = icp(nil, fakeStream{ctx: context.Background()}, &grpc.StreamServerInfo{FullMethod: "/t.S/M"},
			func(any, grpc.ServerStream) error { panic("boom") })
		return nil
	}()
	if panicked == nil && err == nil {
		t.Fatal("stream handler panicked; interceptor returned nil: an OK status")
	}
}
