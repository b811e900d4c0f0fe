package grpcadmit_test

import (
	"context"
	"fmt"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/groupexec/groupexec/breaker"
	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/grpcadmit"
)

// A handler that returns its context's error as it is (return nil,
// ctx.Err()) is answered DeadlineExceeded or Canceled by gRPC, so
// ServerFailure does not count it as a failure of the server.
func TestServerFailureReadsContextErrorsAsGRPCSends(t *testing.T) {
	for _, err := range []error{context.DeadlineExceeded, context.Canceled, fmt.Errorf("query: %w", context.DeadlineExceeded)} {
		if grpcadmit.ServerFailure(err) {
			t.Errorf("ServerFailure(%v) = true, want false", err)
		}
	}
	for _, err := range []error{fmt.Errorf("plain"), status.Error(codes.Internal, "x")} {
		if !grpcadmit.ServerFailure(err) {
			t.Errorf("ServerFailure(%v) = false, want true", err)
		}
	}
}

// A caller's deadline that passes in the handler, which returns its
// context's error, does not open the tenant's breaker. (A DeadlineExceeded
// returned while the call is alive is the handler's own, a failure:
// TestHandlerOwnDeadlineIsAFailure.)
func TestUnaryHandlerDeadlineIsNoFailure(t *testing.T) {
	ev := newEvents()
	ex := newExec(t, nil, ev.listener(), executor.WithGroupBreaker(breaker.Settings{
		ReadyToTrip: func(c breaker.Counts) bool { return c.ConsecutiveFailures >= 1 },
	}))
	g := newGate()
	g.release()
	g.reply = func(ctx context.Context, _ string) error { <-ctx.Done(); return ctx.Err() }
	var d deadlines
	cc := dial(t, start(t, g, grpc.ChainUnaryInterceptor(d.unary, grpcadmit.UnaryServerInterceptor(ex))))
	for range 2 {
		d.next()
		done := make(chan error)
		go func() { _, err := call(context.Background(), cc, "a", "x"); done <- err }()
		<-g.entered
		d.pass()
		if err := <-done; status.Code(err) != codes.DeadlineExceeded {
			t.Fatalf("call: %v, want DeadlineExceeded", err)
		}
		<-ev.completed
	}
	if s, _ := ex.GroupStats("a"); s.Failed != 0 || s.Breaker != breaker.StateClosed {
		t.Errorf("%d failed, breaker %v; want 0 and closed", s.Failed, s.Breaker)
	}
}

// A handler that returns context.Canceled (its caller went away), or a
// status with code Canceled (the same, in gRPC's words), counts as
// Cancelled, not as a success nor a failure.
func TestUnaryHandlerCancelledCountsCancelled(t *testing.T) {
	for _, herr := range []error{context.Canceled, status.Error(codes.Canceled, "caller went away")} {
		ex := newExec(t, nil)
		g := newGate()
		g.release()
		g.reply = func(context.Context, string) error { return herr }
		cc := dial(t, start(t, g, unary(ex)))
		if _, err := call(context.Background(), cc, "a", "x"); status.Code(err) != codes.Canceled {
			t.Fatalf("call: %v, want Canceled", err)
		}
		if s, _ := ex.GroupStats("a"); s.Failed != 0 || s.Succeeded != 0 || s.Cancelled != 1 {
			t.Errorf("handler's %v: %d failed, %d succeeded, %d cancelled; want 0, 0 and 1", herr, s.Failed, s.Succeeded, s.Cancelled)
		}
	}
}
