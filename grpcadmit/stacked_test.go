package grpcadmit_test

import (
	"context"
	"testing"
	"time"

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
// interceptor (its dependency's breaker is open in this process) ran and
// could not serve: ServerFailure counts it as for any Unavailable.
func TestServerHandlerReturningClientRefusalIsFailure(t *testing.T) {
	out := newExec(t, nil)
	if err := out.ShutdownGroup(context.Background(), "dep"); err != nil {
		t.Fatal(err)
	}
	client := grpcadmit.UnaryClientInterceptor(out, grpcadmit.WithTenantFunc(func(context.Context) (string, error) { return "dep", nil }))
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(1)})
	dep := dial(t, "127.0.0.1:1") // never connected: the call is refused before
	g := newGate()
	g.release()
	g.reply = func(ctx context.Context, _ string) error {
		return client(ctx, "/dep/Call", nil, nil, dep, func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error {
			t.Error("the refused outgoing call was sent")
			return nil
		})
	}
	cc := dial(t, start(t, g, unary(ex)))
	if _, err := call(context.Background(), cc, "a", "x"); status.Code(err) != codes.Unavailable {
		t.Fatalf("got %v, want the outgoing call's Unavailable", err)
	}
	if s, _ := ex.GroupStats("a"); s.Failed != 1 {
		t.Errorf("%+v, want 1 failed", s.TaskCounts)
	}
}
