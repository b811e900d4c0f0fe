package grpcadmit_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/grpcadmit"
	"github.com/groupexec/groupexec/policy"
)

// endingCtx is a context whose deadline the test ends by hand, so that the
// call is known to wait when it passes.
type endingCtx struct {
	context.Context
	once sync.Once
	done chan struct{}
}

func newEndingCtx(parent context.Context) *endingCtx {
	return &endingCtx{Context: parent, done: make(chan struct{})}
}

func (c *endingCtx) Done() <-chan struct{} { return c.done }

func (c *endingCtx) Err() error {
	select {
	case <-c.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

func (c *endingCtx) end() { c.once.Do(func() { close(c.done) }) }

// A call whose deadline passes while it waits is refused with
// DeadlineExceeded and no RetryInfo; the handler never sees it and its place
// is freed.
func TestUnaryDeadlineWhileQueued(t *testing.T) {
	ev := newEvents()
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(1), policy.WithDefaultMaxInFlight(2)}, ev.listener())
	icp := grpcadmit.UnaryServerInterceptor(ex)
	info := &grpc.UnaryServerInfo{FullMethod: "/test.Gate/Call"}
	md := metadata.Pairs("x-tenant", "a")
	hold := make(chan struct{})
	entered := make(chan struct{}, 2)
	handler := func(ctx context.Context, req any) (any, error) {
		entered <- struct{}{}
		<-hold
		return "ok", nil
	}
	first := make(chan error, 1)
	go func() {
		_, err := icp(metadata.NewIncomingContext(context.Background(), md), "1", info, handler)
		first <- err
	}()
	<-entered
	<-ev.submitted
	ctx := newEndingCtx(metadata.NewIncomingContext(context.Background(), md))
	second := make(chan error, 1)
	go func() { _, err := icp(ctx, "2", info, handler); second <- err }()
	<-ev.submitted
	ctx.end()
	err := <-second
	var re *grpcadmit.RefusalError
	if status.Code(err) != codes.DeadlineExceeded || !errors.As(err, &re) || !errors.Is(err, context.DeadlineExceeded) || retryDelay(err) != -1 {
		t.Errorf("deadline while queued: %v (retry %v); want a *RefusalError with DeadlineExceeded and no RetryInfo", err, retryDelay(err))
	}
	if s, _ := ex.GroupStats("a"); s.Waiting != 0 || s.InFlight != 1 {
		t.Errorf("%+v: the call kept its place", s)
	}
	close(hold)
	if err := <-first; err != nil {
		t.Error(err)
	}
	if len(entered) != 0 {
		t.Error("the handler saw the call whose deadline passed")
	}
}

// A call the client interceptor's executor refuses for a shutdown is not
// sent: a *RefusalError with the code a server interceptor would send
// (Unavailable, with RetryInfo).
func TestClientShutdownIsUnavailable(t *testing.T) {
	ex := newExec(t, nil)
	g := newGate()
	g.release()
	cc := dial(t, start(t, g), grpc.WithChainUnaryInterceptor(grpcadmit.UnaryClientInterceptor(ex)))
	if err := ex.ShutdownGroup(context.Background(), cc.Target()); err != nil {
		t.Fatal(err)
	}
	_, err := call(context.Background(), cc, "", "1")
	var re *grpcadmit.RefusalError
	if status.Code(err) != codes.Unavailable || !errors.As(err, &re) || !errors.Is(err, executor.ErrGroupShutdown) || retryDelay(err) <= 0 {
		t.Errorf("shut-down target: %v (retry %v); want Unavailable with RetryInfo", err, retryDelay(err))
	}
	if n := g.served.Load(); n != 0 {
		t.Errorf("the server saw %d calls, want 0", n)
	}
}
