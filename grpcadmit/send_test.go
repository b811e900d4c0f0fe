package grpcadmit_test

import (
	"context"
	"fmt"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/groupexec/groupexec/breaker"
	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/grpcadmit"
)

// sendingStream is a server stream whose SendMsg and SendHeader fail with
// err, its context still alive: as gRPC's do when the transport closes
// under the stream (its client closed the connection, or the server
// stops), which says so with codes.Unavailable a moment before it ends the
// stream's context.
type sendingStream struct {
	serverStream
	err error
}

func (s *sendingStream) SendMsg(any) error            { return s.err }
func (s *sendingStream) SendHeader(metadata.MD) error { return s.err }

// A stream handler that returns the error its stream's SendMsg or
// SendHeader gave when the transport closed under it (Unavailable) did
// not fail: its client went away. It counts as Cancelled, and the group's
// breaker, which trips on the first failure, stays closed; a client that
// opens streams and closes its connection cannot open it. A send that
// fails for the handler's own message (Internal: it does not encode)
// still counts as a failure, and so does the handler's own Unavailable.
func TestStreamSendErrorOfAClosingTransportIsNoFailure(t *testing.T) {
	closing := status.Error(codes.Unavailable, "transport is closing")
	for _, tc := range []struct {
		name string
		send error                            // what the stream's sends return
		h    func(ss grpc.ServerStream) error // the handler
		want executor.Status
	}{
		{"SendMsg", closing, func(ss grpc.ServerStream) error { return ss.SendMsg(wrapperspb.String("x")) }, executor.Cancelled},
		{"SendMsg wrapped", closing, func(ss grpc.ServerStream) error {
			return fmt.Errorf("sending: %w", ss.SendMsg(wrapperspb.String("x")))
		}, executor.Cancelled},
		{"SendHeader", closing, func(ss grpc.ServerStream) error { return ss.SendHeader(nil) }, executor.Cancelled},
		{"encoding", status.Error(codes.Internal, "grpc: error while marshaling"),
			func(ss grpc.ServerStream) error { return ss.SendMsg(wrapperspb.String("x")) }, executor.Failed},
		{"own Unavailable", closing, func(ss grpc.ServerStream) error {
			_ = ss.SendMsg(wrapperspb.String("x"))
			return status.Error(codes.Unavailable, "the database is down")
		}, executor.Failed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev := newEvents()
			ex := newExec(t, nil, tripOnFirstFailure, ev.listener())
			ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("x-tenant", "acme"))
			ss := &sendingStream{serverStream{ctx: ctx}, tc.send}
			err := grpcadmit.StreamServerInterceptor(ex)(nil, ss, &grpc.StreamServerInfo{FullMethod: "/test.Flood/Flood"},
				func(_ any, ss grpc.ServerStream) error { return tc.h(ss) })
			if status.Code(err) == codes.OK {
				t.Fatalf("the handler's error %v, want it returned", err)
			}
			wantCounted(t, ev, ex, "acme", tc.want)
		})
	}
}

// wantCounted checks that the call ev saw complete ended with want, and
// that group's breaker, which trips on the first failure, is open only if
// want is Failed.
func wantCounted(t *testing.T, ev *events, ex *executor.Executor, group string, want executor.Status) {
	t.Helper()
	if e := <-ev.completed; e.Status != want {
		t.Errorf("the call ended %v (%v), want %v", e.Status, e.Err, want)
	}
	s, _ := ex.GroupStats(group)
	if wantOpen := want == executor.Failed; (s.Breaker == breaker.StateOpen) != wantOpen {
		t.Errorf("breaker %v; want open: %v", s.Breaker, wantOpen)
	}
}
