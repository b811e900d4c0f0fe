package grpcadmit_test

import (
	"context"
	"errors"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/grpcadmit"
	"github.com/groupexec/groupexec/policy"
)

// A tenant key names a group of the whole executor: on one that a client
// interceptor uses too, a caller that sends the client's target as its
// tenant takes the outgoing group's places, and the server's own calls to
// that dependency are refused, as the package documentation warns. An
// executor of its own for the client interceptor keeps them apart.
func TestSharedExecutorLetsACallerTakeAnOutgoingGroup(t *testing.T) {
	for _, shared := range []bool{true, false} {
		name := "own executor"
		if shared {
			name = "shared executor"
		}
		t.Run(name, func(t *testing.T) {
			in := newExec(t, []policy.Option{policy.WithDefaultMaxInFlight(1)})
			out := in
			if !shared {
				out = newExec(t, []policy.Option{policy.WithDefaultMaxInFlight(1)})
			}
			g := newGate()
			g.release()
			cc := dial(t, start(t, g), grpc.WithChainUnaryInterceptor(grpcadmit.UnaryClientInterceptor(out)))

			held, release := make(chan struct{}), make(chan struct{})
			ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("x-tenant", cc.Target()))
			served := make(chan error, 1)
			go func() {
				_, err := grpcadmit.UnaryServerInterceptor(in)(ctx, nil, &grpc.UnaryServerInfo{FullMethod: "/test.Gate/Call"},
					func(context.Context, any) (any, error) { close(held); <-release; return nil, nil })
				served <- err
			}()
			<-held
			_, err := call(context.Background(), cc, "", "x")
			close(release)
			if err := <-served; err != nil {
				t.Fatal(err)
			}
			if refused := errors.Is(err, executor.ErrRejected) && status.Code(err) == codes.ResourceExhausted; refused != shared {
				t.Errorf("the outgoing call: %v; want it refused: %v", err, shared)
			}
		})
	}
}
