package grpcadmit_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

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

// A rejection handler may answer a refusal with its own gRPC status (a quota
// service's ResourceExhausted, say): Do returns that error, and the caller
// must see its code and details, not Internal, which a client counts as the
// server failing (ClientFailure) and which would open its breaker.
func TestRejectionHandlerStatusReachesTheCaller(t *testing.T) {
	want := status.New(codes.ResourceExhausted, "tenant quota exceeded")
	want, _ = want.WithDetails(&errdetails.QuotaFailure{Violations: []*errdetails.QuotaFailure_Violation{{Subject: "a"}}})
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxInFlight(1)},
		executor.WithRejectionHandler(func(*executor.Rejection) error { return want.Err() }))
	defer adaptertest.FillSlot(t, ex, "a")()
	icp := grpcadmit.UnaryServerInterceptor(ex, grpcadmit.WithTenantFunc(func(context.Context) (string, error) { return "a", nil }))
	_, err := icp(context.Background(), "req", &grpc.UnaryServerInfo{FullMethod: "/t.S/M"},
		func(context.Context, any) (any, error) { t.Error("a refused call ran"); return nil, nil })
	st := status.Convert(err)
	if st.Code() != codes.ResourceExhausted || st.Message() != want.Message() || len(st.Details()) != 1 {
		t.Fatalf("got %v (details %v), want the rejection handler's status %v", st, st.Details(), want)
	}
	var re *grpcadmit.RefusalError
	if !errors.As(err, &re) {
		t.Errorf("%T is not a *RefusalError", err)
	}
}

// A rejection handler's error without a gRPC status is the server's own
// (an internal lookup failing, say): the caller gets Internal with a fixed
// message, as httpadmit answers "internal error", and the error's text,
// which may name internal hosts or keys, stays in the server.
func TestRejectionHandlerErrorTextStaysInTheServer(t *testing.T) {
	secret := errors.New("quota db 10.0.0.7:5432: connection refused")
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxInFlight(1)},
		executor.WithRejectionHandler(func(*executor.Rejection) error { return secret }))
	defer adaptertest.FillSlot(t, ex, "a")()
	icp := grpcadmit.UnaryServerInterceptor(ex, grpcadmit.WithTenantFunc(func(context.Context) (string, error) { return "a", nil }))
	_, err := icp(context.Background(), "req", &grpc.UnaryServerInfo{FullMethod: "/t.S/M"},
		func(context.Context, any) (any, error) { t.Error("a refused call ran"); return nil, nil })
	st := status.Convert(err)
	if st.Code() != codes.Internal || st.Message() != "internal error" {
		t.Fatalf("got %v, want Internal with the message \"internal error\"", st)
	}
	if !errors.Is(err, secret) {
		t.Errorf("%v does not unwrap to the rejection handler's error", err)
	}
}

// okStatusError is an error whose gRPC status is OK, as a rejection
// handler's custom error type may carry by mistake.
type okStatusError struct{}

func (okStatusError) Error() string              { return "quota ok" }
func (okStatusError) GRPCStatus() *status.Status { return status.New(codes.OK, "") }

// A rejection handler's error whose status is OK must not be sent as OK: the
// call never ran. It is the server's own failure, Internal, and its Error
// has a text (status.Err of an OK status is nil).
func TestRejectionHandlerOKStatusIsInternal(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxInFlight(1)},
		executor.WithRejectionHandler(func(*executor.Rejection) error { return okStatusError{} }))
	defer adaptertest.FillSlot(t, ex, "a")()
	icp := grpcadmit.UnaryServerInterceptor(ex, grpcadmit.WithTenantFunc(func(context.Context) (string, error) { return "a", nil }))
	_, err := icp(context.Background(), "req", &grpc.UnaryServerInfo{FullMethod: "/t.S/M"},
		func(context.Context, any) (any, error) { t.Error("a refused call ran"); return nil, nil })
	if err == nil {
		t.Fatal("a refused call returned nil")
	}
	if msg := err.Error(); msg == "" {
		t.Error("empty error text")
	}
	st := status.Convert(err)
	if st.Code() != codes.Internal || st.Message() != "internal error" {
		t.Fatalf("got %v, want Internal with the message \"internal error\"", st)
	}
	if !errors.Is(err, okStatusError{}) {
		t.Errorf("%v does not unwrap to the rejection handler's error", err)
	}
}

// A rejection handler's error that wraps one with a gRPC status is sent
// with that status as it is: its code, message and details. status.FromError
// would send the whole chain's text as the message, and with it the
// wrapper's, which may name internal hosts or keys.
func TestRejectionHandlerWrappedStatusKeepsItsMessage(t *testing.T) {
	want := status.New(codes.ResourceExhausted, "tenant quota exceeded")
	want, _ = want.WithDetails(&errdetails.QuotaFailure{Violations: []*errdetails.QuotaFailure_Violation{{Subject: "a"}}})
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxInFlight(1)},
		executor.WithRejectionHandler(func(*executor.Rejection) error {
			return fmt.Errorf("quota lookup at 10.0.0.7:6379: %w", want.Err())
		}))
	defer adaptertest.FillSlot(t, ex, "a")()
	icp := grpcadmit.UnaryServerInterceptor(ex, grpcadmit.WithTenantFunc(func(context.Context) (string, error) { return "a", nil }))
	_, err := icp(context.Background(), "req", &grpc.UnaryServerInfo{FullMethod: "/t.S/M"},
		func(context.Context, any) (any, error) { t.Error("a refused call ran"); return nil, nil })
	st := status.Convert(err)
	if st.Code() != codes.ResourceExhausted || st.Message() != want.Message() || len(st.Details()) != 1 {
		t.Fatalf("got %v (details %v), want the wrapped status %v", st, st.Details(), want)
	}
	if !strings.Contains(fmt.Sprint(errors.Unwrap(err)), "10.0.0.7") {
		t.Errorf("Unwrap gives %v, want the rejection handler's error, for the server's logs", errors.Unwrap(err))
	}
}

// otherGoroutineExec is runInCallerExec whose rejection handler runs the
// refused call on a goroutine of its own, and waits for it.
func otherGoroutineExec(t *testing.T) *executor.Executor {
	return newExec(t, []policy.Option{policy.WithDefaultMaxInFlight(1)},
		executor.WithRejectionHandler(adaptertest.RunElsewhere))
}

// A handler (client-side, an invoker) that a rejection handler runs on
// another goroutine, and that calls runtime.Goexit there, ends that
// goroutine only. The interceptor returns an Internal status that matches
// executor.ErrGoexit: a panic with the executor's error would end the
// process, since gRPC does not recover a handler's panics.
func TestGoexitOnAnotherGoroutineIsInternal(t *testing.T) {
	tenant := grpcadmit.WithTenantFunc(func(context.Context) (string, error) { return "a", nil })
	for _, tc := range []struct {
		name string
		call func(ex *executor.Executor) error
	}{
		{"unary", func(ex *executor.Executor) error {
			_, err := grpcadmit.UnaryServerInterceptor(ex, tenant)(context.Background(), "req",
				&grpc.UnaryServerInfo{FullMethod: "/t.S/M"},
				func(context.Context, any) (any, error) { runtime.Goexit(); return nil, nil })
			return err
		}},
		{"stream", func(ex *executor.Executor) error {
			return grpcadmit.StreamServerInterceptor(ex, tenant)(nil, fakeStream{ctx: context.Background()},
				&grpc.StreamServerInfo{FullMethod: "/t.S/M"},
				func(any, grpc.ServerStream) error { runtime.Goexit(); return nil })
		}},
		{"client", func(ex *executor.Executor) error {
			return grpcadmit.UnaryClientInterceptor(ex, tenant)(context.Background(), "/t.S/M", "req", nil, nil,
				func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error {
					runtime.Goexit()
					return nil
				})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ex := otherGoroutineExec(t)
			defer adaptertest.FillSlot(t, ex, "a")()
			var err error
			panicked := func() (v any) {
				defer func() { v = recover() }()
				err = tc.call(ex)
				return nil
			}()
			if panicked != nil {
				t.Fatalf("the interceptor panicked with %v", panicked)
			}
			if st := status.Convert(err); st.Code() != codes.Internal || st.Message() != "internal error" {
				t.Errorf("got %v, want Internal with the message \"internal error\"", st)
			}
			if !errors.Is(err, executor.ErrGoexit) {
				t.Errorf("%v does not match executor.ErrGoexit", err)
			}
		})
	}
}
