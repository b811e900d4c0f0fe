package grpcadmit_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/groupexec/groupexec/breaker"
	"github.com/groupexec/groupexec/clock"
	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/grpcadmit"
	"github.com/groupexec/groupexec/internal/adaptertest"
)

// deadlines gives each call, by interceptors chained before grpcadmit's,
// a deadline that passes when the test says: pass ends the current one.
type deadlines struct {
	cur atomic.Pointer[adaptertest.Expiring]
}

func (d *deadlines) next() { d.cur.Store(adaptertest.NewExpiring()) }
func (d *deadlines) pass() { d.cur.Load().Expire() }

func (d *deadlines) unary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	return h(d.cur.Load().Over(ctx), req)
}

func (d *deadlines) stream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	return h(srv, &ctxStream{ss, d.cur.Load().Over(ss.Context())})
}

type ctxStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *ctxStream) Context() context.Context { return s.ctx }

// A handler's error returned once its call's context has ended (the
// caller's deadline passed, the caller went away) counts as Cancelled,
// whatever its code: the caller gave up on the call, so it tells nothing of
// the server. Counted as a success, a caller's short deadline would close a
// half-open breaker whose probe never did its work; counted by
// ServerFailure, a handler that reports its dependency's cancelled call as
// Internal would let any caller open its tenant's breaker with short
// deadlines.
func TestHandlerErrorAfterTheCallEndedIsCancelled(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_000_000, 0))
	ev := newEvents()
	ex := newExec(t, nil, ev.listener(), executor.WithGroupBreaker(breaker.Settings{
		Clock: clk, Timeout: time.Minute, ReadyToTrip: func(c breaker.Counts) bool { return c.ConsecutiveFailures >= 1 },
	}))
	g := newGate()
	g.release()
	g.reply = func(ctx context.Context, in string) error {
		switch in {
		case "fail":
			return status.Error(codes.Internal, "broken")
		case "wait":
			<-ctx.Done()
			return ctx.Err() // DeadlineExceeded, no failure
		case "wrap":
			<-ctx.Done()
			return status.Error(codes.Internal, "query: "+ctx.Err().Error())
		}
		return nil
	}
	var d deadlines
	cc := dial(t, start(t, g,
		grpc.ChainUnaryInterceptor(d.unary, grpcadmit.UnaryServerInterceptor(ex)),
		grpc.ChainStreamInterceptor(d.stream, grpcadmit.StreamServerInterceptor(ex))))
	// expire calls in as tenant; its deadline passes once the handler runs.
	expire := func(tenant, in string) error {
		d.next()
		done := make(chan error)
		go func() { _, err := call(context.Background(), cc, tenant, in); done <- err }()
		<-g.entered
		d.pass()
		<-ev.completed
		return <-done
	}

	if err := expire("w", "wrap"); status.Code(err) != codes.Internal {
		t.Fatalf("wrap: %v, want the handler's Internal", err)
	}
	if s, _ := ex.GroupStats("w"); s.Failed != 0 || s.Cancelled != 1 || s.Breaker != breaker.StateClosed {
		t.Errorf("Internal after the deadline: %d failed, %d cancelled, breaker %v; want 0, 1 and closed", s.Failed, s.Cancelled, s.Breaker)
	}

	d.next()
	if _, err := call(context.Background(), cc, "a", "fail"); status.Code(err) != codes.Internal {
		t.Fatalf("fail: %v", err)
	}
	<-g.entered
	<-ev.completed
	clk.Advance(time.Minute) // the next call is the half-open breaker's probe
	if err := expire("a", "wait"); status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("wait: %v, want DeadlineExceeded", err)
	}
	if s, _ := ex.GroupStats("a"); s.Succeeded != 0 || s.Cancelled != 1 || s.Breaker != breaker.StateHalfOpen {
		t.Errorf("probe past its deadline: %d succeeded, %d cancelled, breaker %v; want 0, 1 and half-open", s.Succeeded, s.Cancelled, s.Breaker)
	}

	// A stream's handler alike: Wait returns its context's error.
	d.next()
	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-tenant", "s")
	cs, err := cc.NewStream(ctx, &gateDesc.Streams[1], "/test.Gate/Wait")
	if err != nil {
		t.Fatal(err)
	}
	cs.CloseSend()
	<-g.entered
	d.pass()
	if err := cs.RecvMsg(new(wrapperspb.StringValue)); status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("stream: %v, want DeadlineExceeded", err)
	}
	<-ev.completed
	if s, _ := ex.GroupStats("s"); s.Succeeded != 0 || s.Cancelled != 1 {
		t.Errorf("stream past its deadline: %d succeeded, %d cancelled; want 0 and 1", s.Succeeded, s.Cancelled)
	}
}
