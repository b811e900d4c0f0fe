package grpcadmit_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/grpcadmit"
)

// closingTransport is gRPC's transport stream of a call whose transport
// is closing under it: SendHeader fails with err (Unavailable, as gRPC's
// does then), while the call's context is still alive.
type closingTransport struct{ err error }

func (closingTransport) Method() string                 { return "/test.Gate/Call" }
func (closingTransport) SetHeader(metadata.MD) error    { return nil }
func (t closingTransport) SendHeader(metadata.MD) error { return t.err }
func (closingTransport) SetTrailer(metadata.MD) error   { return nil }

var transportClosing = status.Error(codes.Unavailable, "transport is closing")

// headerCases are handlers that send their header through the call's
// context, when the transport's SendHeader fails with send, and what the
// call then counts as.
var headerCases = []struct {
	name string
	send error
	h    func(ctx context.Context) error
	want executor.Status
}{
	{"SendHeader", transportClosing, func(ctx context.Context) error {
		return grpcadmit.SendHeader(ctx, metadata.Pairs("k", "v"))
	}, executor.Cancelled},
	{"SendHeader wrapped", transportClosing, func(ctx context.Context) error {
		return fmt.Errorf("sending the header: %w", grpcadmit.SendHeader(ctx, nil))
	}, executor.Cancelled},
	// grpc.SendHeader's error goes past the interceptor: use SendHeader.
	{"grpc.SendHeader", transportClosing, func(ctx context.Context) error {
		return grpc.SendHeader(ctx, nil)
	}, executor.Failed},
	{"SendHeader, another code", status.Error(codes.Internal, "header too large"), func(ctx context.Context) error {
		return grpcadmit.SendHeader(ctx, nil)
	}, executor.Failed},
	{"own Unavailable", transportClosing, func(ctx context.Context) error {
		_ = grpcadmit.SendHeader(ctx, nil)
		return status.Error(codes.Unavailable, "the database is down")
	}, executor.Failed},
}

// A handler that returns the error SendHeader gave as the transport
// closed under its call (Unavailable, the call's context alive) did not
// fail: its client went away. It counts as Cancelled, unary or stream,
// and the group's breaker, which trips on the first failure, stays
// closed: a client that makes calls and closes its connection cannot open
// it. grpc.SendHeader's error, which the interceptor cannot tell from a
// dependency's Unavailable, still counts, and so do SendHeader's other
// errors and the handler's own Unavailable.
func TestSendHeaderErrorOfAClosingTransportIsNoFailure(t *testing.T) {
	for _, kind := range []string{"unary", "stream"} {
		for _, tc := range headerCases {
			t.Run(kind+"/"+tc.name, func(t *testing.T) {
				ev := newEvents()
				ex := newExec(t, nil, tripOnFirstFailure, ev.listener())
				ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("x-tenant", "acme"))
				ctx = grpc.NewContextWithServerTransportStream(ctx, closingTransport{tc.send})
				var err error
				if kind == "unary" {
					_, err = grpcadmit.UnaryServerInterceptor(ex)(ctx, nil, &grpc.UnaryServerInfo{FullMethod: "/test.Gate/Call"},
						func(ctx context.Context, _ any) (any, error) { return nil, tc.h(ctx) })
				} else {
					err = grpcadmit.StreamServerInterceptor(ex)(nil, &serverStream{ctx: ctx}, &grpc.StreamServerInfo{FullMethod: "/test.Gate/Echo"},
						func(_ any, ss grpc.ServerStream) error { return tc.h(ss.Context()) })
				}
				if status.Code(err) == codes.OK {
					t.Fatalf("the handler's error %v, want it returned", err)
				}
				wantCounted(t, ev, ex, "acme", tc.want)
			})
		}
	}
}

// SendHeader's error for a closing transport is grpc.SendHeader's to
// anything but the interceptor: the same code, message and status (gRPC
// sends the caller that), and errors.Is matches it. Its other errors, and
// nil, are grpc.SendHeader's own.
func TestSendHeaderKeepsGRPCsError(t *testing.T) {
	ctx := grpc.NewContextWithServerTransportStream(context.Background(), closingTransport{transportClosing})
	err := grpcadmit.SendHeader(ctx, nil)
	if err == transportClosing {
		t.Fatal("the closing transport's error is not marked")
	}
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.Unavailable || st.Message() != "transport is closing" || err.Error() != transportClosing.Error() {
		t.Errorf("SendHeader's error %q, status %v (%v), want %q", err, st, ok, transportClosing)
	}
	if !errors.Is(err, transportClosing) {
		t.Errorf("errors.Is(%v, the transport's error) = false", err)
	}
	other := status.Error(codes.Internal, "header too large")
	ctx = grpc.NewContextWithServerTransportStream(context.Background(), closingTransport{other})
	if err := grpcadmit.SendHeader(ctx, nil); err != other {
		t.Errorf("SendHeader's Internal error %v, want the transport's own", err)
	}
	ctx = grpc.NewContextWithServerTransportStream(context.Background(), closingTransport{})
	if err := grpcadmit.SendHeader(ctx, nil); err != nil {
		t.Errorf("SendHeader on a live transport: %v", err)
	}
	if err := grpcadmit.SendHeader(context.Background(), nil); status.Code(err) != codes.Internal {
		t.Errorf("SendHeader without a call: %v, want grpc.SendHeader's Internal", err)
	}
}
