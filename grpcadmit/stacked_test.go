package grpcadmit_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/groupexec/groupexec/breaker"
	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/grpcadmit"
)

// A server interceptor chained before another (one group per tenant, then
// one per part of the service) counts a call the inner one refused as
// Cancelled: its handler never ran. Counted by ServerFailure, the inner
// group's shutdown or open breaker (Unavailable) would open the tenant's
// breaker.
func TestServerStackedRefusalIsNoFailure(t *testing.T) {
	trip := executor.WithGroupBreaker(breaker.Settings{
		Timeout: time.Hour, ReadyToTrip: func(c breaker.Counts) bool { return c.ConsecutiveFailures >= 1 },
	})
	perTenant := newExec(t, nil, trip)
	perPart := newExec(t, nil)
	if err := perPart.ShutdownGroup(context.Background(), grpcadmit.DefaultGroup); err != nil {
		t.Fatal(err)
	}
	g := newGate()
	g.release()
	part := grpcadmit.WithTenantKey("x-part") // none sent: the default group, shut down
	cc := dial(t, start(t, g,
		grpc.ChainUnaryInterceptor(grpcadmit.UnaryServerInterceptor(perTenant), grpcadmit.UnaryServerInterceptor(perPart, part)),
		grpc.ChainStreamInterceptor(grpcadmit.StreamServerInterceptor(perTenant), grpcadmit.StreamServerInterceptor(perPart, part))))

	if _, err := call(context.Background(), cc, "t1", "x"); status.Code(err) != codes.Unavailable {
		t.Fatalf("unary call: %v, want Unavailable from the inner interceptor", err)
	}
	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-tenant", "t2")
	cs, err := cc.NewStream(ctx, &gateDesc.Streams[0], "/test.Gate/Echo")
	if err != nil {
		t.Fatal(err)
	}
	if err := cs.RecvMsg(new(wrapperspb.StringValue)); status.Code(err) != codes.Unavailable {
		t.Fatalf("stream: %v, want Unavailable from the inner interceptor", err)
	}
	for _, tenant := range []string{"t1", "t2"} {
		if s, _ := perTenant.GroupStats(tenant); s.Failed != 0 || s.Cancelled != 1 || s.Breaker != breaker.StateClosed {
			t.Errorf("tenant %s: %d failed, %d cancelled, breaker %v; want 0, 1 and closed", tenant, s.Failed, s.Cancelled, s.Breaker)
		}
	}
	if n := g.served.Load(); n != 0 {
		t.Errorf("served %d, want 0", n)
	}
}

// A handler that returns its own outgoing call's refusal by a client
// interceptor (its dependency's breaker is open in this process) did no
// work: the call counts as Cancelled, as httpadmit counts a request its
// handler marks refused, and the inbound group's breaker, which trips on
// the first failure, stays closed however many such calls come. The
// caller still gets the refusal's status, RetryInfo included. A real
// failure of the handler still opens the breaker. Counted by
// ServerFailure, the dependency's open breaker (Unavailable) would open
// the breaker of every tenant that calls it.
func TestServerHandlerReturningClientRefusalIsNoFailure(t *testing.T) {
	out := newExec(t, nil, tripOnFirstFailure)
	client := grpcadmit.UnaryClientInterceptor(out, grpcadmit.WithTenantFunc(func(context.Context) (string, error) { return "dep", nil }))
	sent := 0 // the dependency fails, then its breaker refuses
	invoker := func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error {
		sent++
		return status.Error(codes.Unavailable, "dependency down")
	}
	ex := newExec(t, nil, tripOnFirstFailure)
	g := newGate()
	g.release()
	fail := false
	g.reply = func(ctx context.Context, _ string) error {
		if fail {
			return status.Error(codes.Internal, "the handler failed")
		}
		return client(ctx, "/dep/Call", nil, nil, nil, invoker)
	}
	cc := dial(t, start(t, g, unary(ex)))
	if _, err := call(context.Background(), cc, "other", "x"); status.Code(err) != codes.Unavailable {
		t.Fatalf("first call: %v, want the dependency's Unavailable", err) // opens the dependency's breaker
	}
	for i := range 3 {
		if _, err := call(context.Background(), cc, "a", "x"); status.Code(err) != codes.Unavailable || retryDelay(err) <= 0 {
			t.Fatalf("call %d: %v, want the outgoing call's refusal, Unavailable with RetryInfo", i, err)
		}
	}
	if sent != 1 {
		t.Errorf("the dependency was called %d times, want 1: its breaker refused the rest", sent)
	}
	if s, _ := ex.GroupStats("a"); s.Failed != 0 || s.Cancelled != 3 || s.Breaker != breaker.StateClosed {
		t.Fatalf("%d failed, %d cancelled, breaker %v; want 0, 3 and closed", s.Failed, s.Cancelled, s.Breaker)
	}
	fail = true
	if _, err := call(context.Background(), cc, "a", "x"); status.Code(err) != codes.Internal {
		t.Fatalf("failing call: %v, want Internal", err)
	}
	if s, _ := ex.GroupStats("a"); s.Failed != 1 || s.Breaker != breaker.StateOpen {
		t.Errorf("after a real failure: %d failed, breaker %v; want 1 and open", s.Failed, s.Breaker)
	}
}

// tripOnFirstFailure gives each group a breaker that opens on its first
// failure.
var tripOnFirstFailure = executor.WithGroupBreaker(breaker.Settings{
	Timeout: time.Hour, ReadyToTrip: func(c breaker.Counts) bool { return c.ConsecutiveFailures >= 1 },
})

// The refusals in this process that a unary or stream handler may return
// for its own outgoing work, wrapped or not: a client interceptor's
// *RefusalError, an executor's refusal from Do, a breaker's used on its
// own. Each goes back to the caller unchanged and counts as Cancelled, so
// the inbound breaker stays closed; a real failure then opens it. A status
// from the wire is the dependency's answer: counted by ServerFailure.
func TestServerHandlerReturningRefusalIsNoFailure(t *testing.T) {
	out := newExec(t, nil, tripOnFirstFailure)
	if err := out.ShutdownGroup(context.Background(), "shut"); err != nil {
		t.Fatal(err)
	}
	client := grpcadmit.UnaryClientInterceptor(out, grpcadmit.WithTenantFunc(func(context.Context) (string, error) { return "shut", nil }))
	clientRefusal := client(context.Background(), "/dep/Call", nil, nil, nil, func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error {
		t.Error("the refused outgoing call was sent")
		return nil
	})
	var re *grpcadmit.RefusalError
	if !errors.As(clientRefusal, &re) {
		t.Fatalf("outgoing call: %v, want a *RefusalError", clientRefusal)
	}
	out.Do(context.Background(), "dep", func(context.Context) error { return errors.New("down") }) // opens dep's breaker
	doRefusal := out.Do(context.Background(), "dep", func(context.Context) error { return nil })
	if !errors.Is(doRefusal, breaker.ErrOpenState) {
		t.Fatalf("Do: %v, want the open breaker's refusal", doRefusal)
	}
	refusals := []error{
		clientRefusal,
		fmt.Errorf("charge: %w", clientRefusal),
		doRefusal,
		fmt.Errorf("charge: %w", breaker.ErrOpenState),
		breaker.ErrTooManyRequests,
	}
	ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("x-tenant", "a"))
	for _, kind := range []string{"unary", "stream"} {
		ex := newExec(t, nil, tripOnFirstFailure)
		serve := func(herr error) error {
			if kind == "unary" {
				_, err := grpcadmit.UnaryServerInterceptor(ex)(ctx, nil, nil, func(context.Context, any) (any, error) { return nil, herr })
				return err
			}
			return grpcadmit.StreamServerInterceptor(ex)(nil, &trailerStream{serverStream{ctx: ctx}}, nil, func(any, grpc.ServerStream) error { return herr })
		}
		for i, refusal := range refusals {
			if err := serve(refusal); err != refusal {
				t.Errorf("%s, refusal %d: returned %v, want %v unchanged", kind, i, err, refusal)
			}
		}
		if s, _ := ex.GroupStats("a"); s.Failed != 0 || s.Cancelled != uint64(len(refusals)) || s.Breaker != breaker.StateClosed {
			t.Errorf("%s: %d failed, %d cancelled, breaker %v; want 0, %d and closed", kind, s.Failed, s.Cancelled, s.Breaker, len(refusals))
		}
		// The dependency's own refusal, as a grpcadmit server sends it.
		st, err := status.New(codes.Unavailable, "the dependency refused").WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(time.Second)})
		if err != nil {
			t.Fatal(err)
		}
		wire := st.Err()
		if err := serve(wire); err != wire {
			t.Errorf("%s, failure: returned %v, want %v unchanged", kind, err, wire)
		}
		if s, _ := ex.GroupStats("a"); s.Failed != 1 || s.Breaker != breaker.StateOpen {
			t.Errorf("%s, after a failure: %d failed, breaker %v; want 1 and open", kind, s.Failed, s.Breaker)
		}
	}
}

// trailerStream is a serverStream that drops the trailer of a refusal.
type trailerStream struct{ serverStream }

func (*trailerStream) SetTrailer(metadata.MD) {}
