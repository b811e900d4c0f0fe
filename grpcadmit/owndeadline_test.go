package grpcadmit_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/groupexec/groupexec/breaker"
	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/grpcadmit"
)

// A handler whose own outgoing work timed out while its call is alive (a
// dependency that does not answer within the handler's timeout) returns
// DeadlineExceeded: that says the server failed, not its caller, whose
// deadline has not passed. By default it counts as a failure, so that a
// hanging dependency opens the group's breaker as ServerFailure's codes do;
// counted as a success, it would never open, and would close a half-open
// one.
func TestHandlerOwnDeadlineIsAFailure(t *testing.T) {
	ev := newEvents()
	ex := newExec(t, nil, ev.listener(), executor.WithGroupBreaker(breaker.Settings{
		ReadyToTrip: func(c breaker.Counts) bool { return c.ConsecutiveFailures >= 1 },
	}))
	g := newGate()
	g.release()
	g.reply = func(ctx context.Context, in string) error {
		switch in {
		case "status":
			// A gRPC client's error when its own deadline passed.
			return status.Error(codes.DeadlineExceeded, "context deadline exceeded")
		case "plain":
			// The error of the handler's own timeout context.
			return fmt.Errorf("query: %w", context.DeadlineExceeded)
		}
		return nil
	}
	cc := dial(t, start(t, g,
		grpc.ChainUnaryInterceptor(grpcadmit.UnaryServerInterceptor(ex)),
		grpc.ChainStreamInterceptor(grpcadmit.StreamServerInterceptor(ex))))
	for _, in := range []string{"status", "plain"} {
		tenant := "t-" + in
		if _, err := call(context.Background(), cc, tenant, in); status.Code(err) != codes.DeadlineExceeded {
			t.Fatalf("%s: %v, want the handler's DeadlineExceeded", in, err)
		}
		<-ev.completed
		if s, _ := ex.GroupStats(tenant); s.Failed != 1 || s.Succeeded != 0 || s.Breaker != breaker.StateOpen {
			t.Errorf("%s: %d failed, %d succeeded, breaker %v; want 1, 0 and open", in, s.Failed, s.Succeeded, s.Breaker)
		}
	}

	// WithFailure still decides: it sees the error, as before.
	exF := newExec(t, nil)
	seen := make(chan error, 1)
	ccF := dial(t, start(t, g, grpc.ChainUnaryInterceptor(grpcadmit.UnaryServerInterceptor(exF,
		grpcadmit.WithFailure(func(err error) bool { seen <- err; return false })))))
	if _, err := call(context.Background(), ccF, "f", "status"); status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("WithFailure: %v", err)
	}
	if err := <-seen; status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("WithFailure saw %v, want the handler's DeadlineExceeded", err)
	}
	if s, _ := exF.GroupStats("f"); s.Failed != 0 || s.Succeeded != 1 {
		t.Errorf("WithFailure saying no: %d failed, %d succeeded; want 0 and 1", s.Failed, s.Succeeded)
	}
}

// pastDeadline is a call's context whose deadline has passed by the clock
// while its timer has not fired yet, as on a loaded server: Err is nil.
type pastDeadline struct{ context.Context }

func (pastDeadline) Deadline() (time.Time, bool) { return time.Unix(1, 0), true }

// A handler's error once its call's deadline has passed by the clock counts
// as Cancelled even before the context's timer fires: on a loaded server,
// the handler's outgoing call, which carried the caller's deadline, can
// come back with its dependency's DeadlineExceeded first, and the caller's
// deadline would count as the server's failure.
func TestHandlerErrorPastTheDeadlineIsCancelled(t *testing.T) {
	ev := newEvents()
	ex := newExec(t, nil, ev.listener())
	g := newGate()
	g.release()
	g.reply = func(ctx context.Context, in string) error {
		if ctx.Err() != nil {
			t.Error("the context ended: the test needs a timer that has not fired")
		}
		return status.Error(codes.DeadlineExceeded, "the dependency's deadline")
	}
	late := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		return h(pastDeadline{ctx}, req)
	}
	cc := dial(t, start(t, g, grpc.ChainUnaryInterceptor(late, grpcadmit.UnaryServerInterceptor(ex))))
	if _, err := call(context.Background(), cc, "a", "x"); status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("call: %v, want the handler's DeadlineExceeded", err)
	}
	<-ev.completed
	if s, _ := ex.GroupStats("a"); s.Failed != 0 || s.Cancelled != 1 {
		t.Errorf("%d failed, %d cancelled; want 0 and 1", s.Failed, s.Cancelled)
	}
}
