package grpcadmit_test

import (
	"context"
	"fmt"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/grpcadmit"
)

// goneKey is the context key, set by detached, of the Done channel of the
// context gRPC gave a call: it closes as the call's transport closes.
type goneKey struct{}

// detached is ctx without its cancellation, its values kept (gRPC's stream
// among them), with ctx's Done under goneKey.
func detached(ctx context.Context) context.Context {
	return context.WithValue(context.WithoutCancel(ctx), goneKey{}, ctx.Done())
}

// detachUnary and detachStream, chained before grpcadmit's interceptors,
// give them each call's context without its cancellation. gRPC fails the
// sends of a closing transport with Unavailable a moment before it cancels
// its calls' contexts; a handler that waits for goneKey's channel, then
// sends, meets that moment on a context still alive, as a handler whose
// send falls in it does, where a test could not make it fall there by
// timing.
func detachUnary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	return h(detached(ctx), req)
}

func detachStream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	return h(srv, &ctxStream{ss, detached(ss.Context())})
}

// A handler that sends its header with grpcadmit.SendHeader, as its client
// closes the connection under the call (gRPC fails the send with
// Unavailable before it ends the call's context), returns that error,
// returned or wrapped, and the call counts as Cancelled: the group's
// breaker, which trips on the first failure, stays closed, and a client
// that opens calls and closes its connection cannot open it. The same
// send by grpc.SendHeader, which goes by gRPC's own stream, counts as a
// failure: the interceptors cannot tell it from the handler's own
// Unavailable; unless WithTransportWatch has them watch gRPC's stream,
// when it counts as Cancelled too, returned or wrapped.
func TestSendHeaderOfARealClosingTransportIsNoFailure(t *testing.T) {
	watch := []grpcadmit.Option{grpcadmit.WithTransportWatch()}
	for _, path := range []string{"unary", "stream"} {
		for _, tc := range []struct {
			name string
			send func(context.Context, metadata.MD) error
			opts []grpcadmit.Option
			want executor.Status
		}{
			{"grpcadmit.SendHeader", grpcadmit.SendHeader, nil, executor.Cancelled},
			{"grpcadmit.SendHeader wrapped", func(ctx context.Context, md metadata.MD) error {
				return fmt.Errorf("sending the header: %w", grpcadmit.SendHeader(ctx, md))
			}, nil, executor.Cancelled},
			{"grpc.SendHeader", grpc.SendHeader, nil, executor.Failed},
			{"grpc.SendHeader watched", grpc.SendHeader, watch, executor.Cancelled},
			{"grpc.SendHeader watched, wrapped", func(ctx context.Context, md metadata.MD) error {
				return fmt.Errorf("sending the header: %w", grpc.SendHeader(ctx, md))
			}, watch, executor.Cancelled},
			{"grpcadmit.SendHeader watched", grpcadmit.SendHeader, watch, executor.Cancelled},
		} {
			t.Run(path+"/"+tc.name, func(t *testing.T) {
				ev := newEvents()
				ex := newExec(t, nil, tripOnFirstFailure, ev.listener())
				g := newGate()
				g.release()
				running, sent := make(chan struct{}, 1), make(chan error, 1)
				g.reply = func(ctx context.Context, _ string) error {
					running <- struct{}{}
					<-ctx.Value(goneKey{}).(<-chan struct{}) // the transport has closed
					err := tc.send(ctx, metadata.Pairs("x-sent", "header"))
					sent <- err
					return err
				}
				addr := start(t, g,
					grpc.ChainUnaryInterceptor(detachUnary, grpcadmit.UnaryServerInterceptor(ex, tc.opts...)),
					grpc.ChainStreamInterceptor(detachStream, grpcadmit.StreamServerInterceptor(ex, tc.opts...)))
				conns := make(chan net.Conn, 1)
				cc := dial(t, addr, grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
					c, err := new(net.Dialer).DialContext(ctx, "tcp", addr)
					if err == nil {
						select {
						case conns <- c: // the first: the call's
						default:
						}
					}
					return c, err
				}))

				ctx := metadata.AppendToOutgoingContext(context.Background(), "x-tenant", "acme")
				called := make(chan error, 1)
				go func() {
					if path == "unary" {
						_, err := call(ctx, cc, "", "x")
						called <- err
						return
					}
					cs, err := cc.NewStream(ctx, &gateDesc.Streams[2], "/test.Gate/First")
					if err == nil {
						err = cs.SendMsg(wrapperspb.String("x"))
					}
					if err == nil {
						err = cs.RecvMsg(new(wrapperspb.StringValue))
					}
					called <- err
				}()
				<-running
				(<-conns).Close() // the client goes away: no RST_STREAM, no GOAWAY
				if err := <-called; status.Code(err) != codes.Unavailable {
					t.Fatalf("the client's call: %v, want Unavailable", err)
				}
				if err := <-sent; status.Code(err) != codes.Unavailable {
					t.Fatalf("the send: %v, want gRPC's Unavailable of a closing transport", err)
				}
				wantCounted(t, ev, ex, "acme", tc.want)
			})
		}
	}
}
