package grpcadmit_test

import (
	"context"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/grpcadmit"
)

func groupOf(ctx context.Context) string {
	if g, ok := executor.GroupFromContext(ctx); ok {
		return g
	}
	return "<none>"
}

// A unary handler run by the interceptor learns the group its call was
// admitted under from its context: the tenant the call named, or the
// default group.
func TestUnaryHandlerGetsTheGroup(t *testing.T) {
	ex := newExec(t, nil)
	g := newGate()
	g.release()
	groups := make(chan string, 2)
	g.reply = func(ctx context.Context, _ string) error { groups <- groupOf(ctx); return nil }
	cc := dial(t, start(t, g, grpc.ChainUnaryInterceptor(grpcadmit.UnaryServerInterceptor(ex, grpcadmit.WithDefaultGroup("anon")))))
	for _, tc := range []struct{ tenant, want string }{{"acme", "acme"}, {"", "anon"}} {
		if _, err := call(context.Background(), cc, tc.tenant, "x"); err != nil {
			t.Fatal(err)
		}
		if got := <-groups; got != tc.want {
			t.Errorf("tenant %q: the handler's group %q, want %q", tc.tenant, got, tc.want)
		}
	}
}

// serverStream is a grpc.ServerStream with a context of its own, enough for
// an interceptor that admits a stream whose handler reads nothing.
type serverStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *serverStream) Context() context.Context { return s.ctx }

// A stream's handler learns the group from its stream's context, and a
// tenant function's group from its call's, as a unary handler does.
func TestStreamAndTenantFuncHandlersGetTheGroup(t *testing.T) {
	ex := newExec(t, nil)
	ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("x-tenant", "acme"))
	var got string
	err := grpcadmit.StreamServerInterceptor(ex)(nil, &serverStream{ctx: ctx}, &grpc.StreamServerInfo{FullMethod: "/test.Gate/Echo"},
		func(_ any, ss grpc.ServerStream) error { got = groupOf(ss.Context()); return nil })
	if err != nil {
		t.Fatal(err)
	}
	if got != "acme" {
		t.Errorf("the stream handler's group %q, want acme", got)
	}
	icp := grpcadmit.UnaryServerInterceptor(ex, grpcadmit.WithTenantFunc(func(context.Context) (string, error) { return "from-func", nil }))
	if _, err := icp(ctx, nil, &grpc.UnaryServerInfo{FullMethod: "/test.Gate/Call"}, func(ctx context.Context, _ any) (any, error) {
		got = groupOf(ctx)
		return nil, nil
	}); err != nil {
		t.Fatal(err)
	}
	if got != "from-func" {
		t.Errorf("the unary handler's group, from a tenant function: %q, want from-func", got)
	}
}
