package grpcadmit_test

import (
	"context"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/grpcadmit"
)

// A message that an outgoing stream's SendMsg cannot encode (a proto3
// string holding invalid UTF-8, copied from a caller's input) fails in this
// process: gRPC returns such an error of the client's from SendMsg itself,
// and a failure of the server's as io.EOF, its status read by RecvMsg. The
// stream counts as Cancelled, not as the dependency's failure, whose
// breaker a caller's bad input could otherwise open for every caller; the
// slot is free when SendMsg returns. So is a SendMsg called after
// CloseSend, the caller's own mistake.
func TestStreamClientSendErrorOfTheCallerIsNoFailure(t *testing.T) {
	for _, tc := range []struct {
		name string
		send func(grpc.ClientStream) error
	}{
		{"invalid UTF-8", func(s grpc.ClientStream) error {
			return s.SendMsg(wrapperspb.String("a\xffb"))
		}},
		{"after CloseSend", func(s grpc.ClientStream) error {
			if err := s.CloseSend(); err != nil {
				return err
			}
			return s.SendMsg(wrapperspb.String("x"))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ex, ev, cc, opened := streamClient(t, tripOnFirstFailure)
			cs, err := newStream(context.Background(), cc, "Echo", true, true)
			if err != nil {
				t.Fatal(err)
			}
			await(t, opened, "the stream opened at the server")
			if err := tc.send(cs); status.Code(err) != codes.Internal {
				t.Fatalf("SendMsg: %v; want gRPC's Internal", err)
			}
			if n := slots(ex, cc.Target()); n != 0 {
				t.Errorf("%d slots held after SendMsg's error; want none", n)
			}
			wantCounted(t, ev, ex, cc.Target(), executor.Cancelled)
		})
	}
}

// stallServer serves /test.Stall/Stall, a stream whose handler reads
// nothing (its client's sends fill the window), tells opened once it
// runs, and fails with Unavailable once fail is closed.
func stallServer(t *testing.T) (addr string, opened chan struct{}, fail chan struct{}) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	opened, fail = make(chan struct{}), make(chan struct{})
	srv := grpc.NewServer()
	srv.RegisterService(&grpc.ServiceDesc{ServiceName: "test.Stall", HandlerType: (*any)(nil), Streams: []grpc.StreamDesc{{
		StreamName: "Stall",
		Handler: func(any, grpc.ServerStream) error {
			close(opened)
			<-fail
			return status.Error(codes.Unavailable, "down")
		},
		ClientStreams: true,
		ServerStreams: true,
	}}}, struct{}{})
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	return lis.Addr().String(), opened, fail
}

// sendUntilError sends large messages on cs until SendMsg fails, on a
// goroutine of its own; it tells sent after the first, and sendErr the
// error.
func sendUntilError(cs grpc.ClientStream) (sent chan struct{}, sendErr chan error) {
	big := wrapperspb.String(strings.Repeat("x", 256<<10))
	sent, sendErr = make(chan struct{}, 1), make(chan error, 1)
	go func() {
		for {
			if err := cs.SendMsg(big); err != nil {
				sendErr <- err
				return
			}
			select {
			case sent <- struct{}{}:
			default:
			}
		}
	}()
	return sent, sendErr
}

// A server's failure that ends a stream while its SendMsg is in flight on
// another goroutine (blocked: the server reads nothing) is the
// dependency's failure still: SendMsg returns io.EOF, RecvMsg the status,
// and the stream counts as Failed, its slot freed.
func TestStreamClientServerFailureDuringSendIsAFailure(t *testing.T) {
	addr, opened, fail := stallServer(t)
	ev := newEvents()
	ex := newExec(t, nil, tripOnFirstFailure, ev.listener())
	cc := dial(t, addr, grpc.WithStreamInterceptor(grpcadmit.StreamClientInterceptor(ex)))
	cs, err := cc.NewStream(context.Background(), &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, "/test.Stall/Stall")
	if err != nil {
		t.Fatal(err)
	}
	await(t, opened, "the stream opened at the server")
	sent, sendErr := sendUntilError(cs)
	await(t, sent, "a first SendMsg")
	close(fail)
	if err := cs.RecvMsg(new(wrapperspb.StringValue)); status.Code(err) != codes.Unavailable {
		t.Fatalf("RecvMsg: %v; want the server's Unavailable", err)
	}
	if err := await(t, sendErr, "SendMsg's return"); err != io.EOF {
		t.Errorf("SendMsg: %v; want io.EOF", err)
	}
	wantCounted(t, ev, ex, cc.Target(), executor.Failed)
	if n := slots(ex, cc.Target()); n != 0 {
		t.Errorf("%d slots held; want none", n)
	}
}

// The ClientConn closed while a stream's SendMsg is blocked ends the
// stream as it ends one at rest: gRPC's end, which waits for SendMsg to
// return, frees the slot once it does, and the stream counts as
// Cancelled.
func TestStreamClientConnCloseWhileSendingFreesTheSlot(t *testing.T) {
	addr, opened, fail := stallServer(t)
	defer close(fail)
	ev := newEvents()
	ex := newExec(t, nil, tripOnFirstFailure, ev.listener())
	cc := dial(t, addr, grpc.WithStreamInterceptor(grpcadmit.StreamClientInterceptor(ex)))
	cs, err := cc.NewStream(context.Background(), &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, "/test.Stall/Stall")
	if err != nil {
		t.Fatal(err)
	}
	await(t, opened, "the stream opened at the server")
	sent, sendErr := sendUntilError(cs)
	await(t, sent, "a first SendMsg")
	target := cc.Target()
	cc.Close()
	if err := await(t, sendErr, "SendMsg's return"); err != io.EOF {
		t.Errorf("SendMsg: %v; want io.EOF", err)
	}
	wantCounted(t, ev, ex, target, executor.Cancelled)
	if n := slots(ex, target); n != 0 {
		t.Errorf("%d slots held; want none", n)
	}
}

// await receives from ch, failing the test with what it waited for if
// nothing comes within 10 s: a stream that hangs fails here, not at the
// binary's timeout.
func await[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}
