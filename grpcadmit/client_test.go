package grpcadmit_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/groupexec/groupexec/breaker"
	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/grpcadmit"
	"github.com/groupexec/groupexec/internal/adaptertest"
	"github.com/groupexec/groupexec/policy"
)

// The client interceptor bounds the calls to each target: a full target's
// call is refused locally, another target is served.
func TestClientBoundsEachTarget(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxInFlight(1)})
	g := newGate()
	addr := start(t, g)
	icp := grpc.WithChainUnaryInterceptor(grpcadmit.UnaryClientInterceptor(ex))
	cc := dial(t, addr, icp)
	other := dial(t, strings.Replace(addr, "127.0.0.1", "localhost", 1), icp)

	first := make(chan error)
	go func() { _, err := call(context.Background(), cc, "", "1"); first <- err }()
	<-g.entered
	_, err := call(context.Background(), cc, "", "2")
	var re *grpcadmit.RefusalError
	if !errors.Is(err, executor.ErrRejected) || status.Code(err) != codes.ResourceExhausted || !errors.As(err, &re) {
		t.Fatalf("second call to a full target: %v", err)
	}
	done := make(chan error)
	go func() { _, err := call(context.Background(), other, "", "3"); done <- err }()
	if v := <-g.entered; v != "3" {
		t.Fatalf("entered %q", v)
	}
	if s, _ := ex.GroupStats(cc.Target()); s.InFlight != 1 {
		t.Errorf("%s: %d in flight", cc.Target(), s.InFlight)
	}
	g.release()
	if err := <-first; err != nil {
		t.Error(err)
	}
	if err := <-done; err != nil {
		t.Error(err)
	}
	if s, _ := ex.GroupStats(cc.Target()); s.InFlight != 0 || s.Succeeded != 1 || s.Rejected != 1 {
		t.Errorf("%+v", s)
	}
	if g.served.Load() != 2 {
		t.Errorf("served %d, want 2", g.served.Load())
	}
}

// With WithTenantKey the client groups by the outgoing metadata's tenant;
// the server's errors count as failures by the same rule as server-side.
func TestClientTenantKeyAndFailures(t *testing.T) {
	ev := newEvents()
	ex := newExec(t, nil, ev.listener())
	g := newGate()
	g.release()
	g.reply = func(_ context.Context, in string) error {
		if in == "fail" {
			return status.Error(codes.Unavailable, "down")
		}
		return nil
	}
	cc := dial(t, start(t, g), grpc.WithChainUnaryInterceptor(
		grpcadmit.UnaryClientInterceptor(ex, grpcadmit.WithTenantKey("x-tenant"))))
	if _, err := call(context.Background(), cc, "t1", "fail"); status.Code(err) != codes.Unavailable {
		t.Fatalf("call's error: %v", err)
	}
	if e := <-ev.completed; e.Group != "t1" || e.Status != executor.Failed {
		t.Errorf("%s %v", e.Group, e.Status)
	}
	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-tenant", "a", "x-tenant", "b")
	if _, err := call(ctx, cc, "", "x"); status.Code(err) != codes.InvalidArgument {
		t.Errorf("two tenants: %v", err)
	}
	if _, err := call(context.Background(), cc, "", "x"); err != nil {
		t.Fatal(err)
	}
	if e := <-ev.completed; e.Group != grpcadmit.DefaultGroup || e.Status != executor.Success {
		t.Errorf("%s %v", e.Group, e.Status)
	}
}

// A call that runs out of time counts, for the client, as a failure of the
// dependency, so that one that keeps timing out opens its breaker; a server
// does not count its caller's deadline against itself
// (TestUnaryHandlerDeadlineIsNoFailure).
func TestClientDeadlineIsFailure(t *testing.T) {
	ex := newExec(t, nil, executor.WithGroupBreaker(breaker.Settings{
		Timeout: time.Hour, ReadyToTrip: func(c breaker.Counts) bool { return c.ConsecutiveFailures >= 2 },
	}))
	g := newGate()
	g.release()
	// What a call whose deadline passes gets, without waiting for one.
	g.reply = func(context.Context, string) error { return status.Error(codes.DeadlineExceeded, "too slow") }
	cc := dial(t, start(t, g), grpc.WithChainUnaryInterceptor(grpcadmit.UnaryClientInterceptor(ex)))
	for range 2 {
		if _, err := call(context.Background(), cc, "", "x"); status.Code(err) != codes.DeadlineExceeded {
			t.Fatalf("call: %v, want DeadlineExceeded", err)
		}
	}
	if s, _ := ex.GroupStats(cc.Target()); s.Failed != 2 || s.Breaker != breaker.StateOpen {
		t.Errorf("%d failed, breaker %v; want 2 and open", s.Failed, s.Breaker)
	}
	if !grpcadmit.ClientFailure(status.Error(codes.DeadlineExceeded, "x")) || !grpcadmit.ClientFailure(context.DeadlineExceeded) ||
		grpcadmit.ClientFailure(status.Error(codes.NotFound, "x")) || grpcadmit.ServerFailure(status.Error(codes.DeadlineExceeded, "x")) {
		t.Error("ClientFailure must add DeadlineExceeded to ServerFailure's codes, and only it")
	}
}

// A call whose deadline passes while it waits in a client interceptor's
// local queue ends with DeadlineExceeded, but never reached its
// dependency: ClientFailure does not count it, and neither does the
// breaker of an interceptor chained before (one group per target, the
// tenants' own groups after it), where it counts as Cancelled.
func TestClientLocalQueueDeadlineIsNoFailure(t *testing.T) {
	trip := executor.WithGroupBreaker(breaker.Settings{
		Timeout: time.Hour, ReadyToTrip: func(c breaker.Counts) bool { return c.ConsecutiveFailures >= 1 },
	})
	perTarget := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(2)}, trip)
	ev := newEvents()
	perTenant := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(1)}, ev.listener())
	g := newGate()
	cc := dial(t, start(t, g), grpc.WithChainUnaryInterceptor(
		grpcadmit.UnaryClientInterceptor(perTarget),
		grpcadmit.UnaryClientInterceptor(perTenant, grpcadmit.WithTenantKey("x-tenant"))))
	done := make(chan error)
	go func() { _, err := call(context.Background(), cc, "t1", "1"); done <- err }()
	<-g.entered
	<-ev.submitted
	// The first call holds t1's only slot until the second has ended: the
	// second's deadline passes once it is in t1's group.
	ctx := adaptertest.NewExpiring()
	go func() { <-ev.submitted; ctx.Expire() }()
	_, err := call(ctx, cc, "t1", "2")
	var re *grpcadmit.RefusalError
	if status.Code(err) != codes.DeadlineExceeded || !errors.As(err, &re) {
		t.Fatalf("call queued past its deadline: %v, want a *RefusalError with DeadlineExceeded", err)
	}
	if grpcadmit.ClientFailure(err) {
		t.Error("ClientFailure counts a call refused in this process as a failure of its dependency")
	}
	if s, _ := perTarget.GroupStats(cc.Target()); s.Failed != 0 || s.Cancelled != 1 || s.Breaker != breaker.StateClosed {
		t.Errorf("target's group: %d failed, %d cancelled, breaker %v; want 0, 1 and closed", s.Failed, s.Cancelled, s.Breaker)
	}
	g.release()
	if err := <-done; err != nil {
		t.Error(err)
	}
}

// A call admitted as its deadline passes (here while the listener is told
// it starts) is not sent, and is no failure of its dependency: gRPC would
// have failed it at once with DeadlineExceeded.
func TestClientDeadlineAtAdmissionIsNotSent(t *testing.T) {
	ctx := adaptertest.NewExpiring()
	ex := newExec(t, nil, executor.WithGroupBreaker(breaker.Settings{
		Timeout: time.Hour, ReadyToTrip: func(c breaker.Counts) bool { return c.ConsecutiveFailures >= 1 },
	}), executor.WithListener(executor.ListenerFuncs{Started: func(executor.Event) { ctx.Expire() }}))
	g := newGate()
	g.release()
	cc := dial(t, start(t, g), grpc.WithChainUnaryInterceptor(grpcadmit.UnaryClientInterceptor(ex)))
	_, err := call(ctx, cc, "", "x")
	if status.Code(err) != codes.DeadlineExceeded || grpcadmit.ClientFailure(err) {
		t.Errorf("call: %v (ClientFailure %v), want DeadlineExceeded and no failure", err, grpcadmit.ClientFailure(err))
	}
	if s, _ := ex.GroupStats(cc.Target()); s.Failed != 0 || s.Breaker != breaker.StateClosed {
		t.Errorf("%d failed, breaker %v; want 0 and closed", s.Failed, s.Breaker)
	}
	if n := len(g.entered); n != 0 {
		t.Errorf("the server saw %d calls, want 0", n)
	}
}

// A call that another interceptor of the caller's chain refuses in this
// process, with an error of the executor's or a breaker's rather than a
// *RefusalError, never reached the dependency either: the client
// interceptor chained before it counts it Cancelled, ClientFailure is
// false, and the caller gets the error unchanged.
func TestClientLocalRefusalOfAnotherKindIsNoFailure(t *testing.T) {
	for _, refusal := range []error{
		fmt.Errorf("caller's bulkhead: %w", executor.ErrRejected),
		breaker.ErrOpenState,
		fmt.Errorf("half-open: %w", breaker.ErrTooManyRequests),
	} {
		trip := executor.WithGroupBreaker(breaker.Settings{
			Timeout: time.Hour, ReadyToTrip: func(c breaker.Counts) bool { return c.ConsecutiveFailures >= 1 },
		})
		perTarget := newExec(t, nil, trip)
		refuse := func(context.Context, string, any, any, *grpc.ClientConn, grpc.UnaryInvoker, ...grpc.CallOption) error {
			return refusal
		}
		cc := dial(t, start(t, newGate()), grpc.WithChainUnaryInterceptor(grpcadmit.UnaryClientInterceptor(perTarget), refuse))
		for range 2 {
			if _, err := call(context.Background(), cc, "t1", "1"); err != refusal {
				t.Fatalf("%v: the caller got %v, want the refusal unchanged", refusal, err)
			}
		}
		if grpcadmit.ClientFailure(refusal) {
			t.Errorf("ClientFailure(%v) = true for a call never sent", refusal)
		}
		if s, _ := perTarget.GroupStats(cc.Target()); s.Failed != 0 || s.Cancelled != 2 || s.Breaker != breaker.StateClosed {
			t.Errorf("%v: target's group: %d failed, %d cancelled, breaker %v; want 0, 2 and closed", refusal, s.Failed, s.Cancelled, s.Breaker)
		}
	}
}
