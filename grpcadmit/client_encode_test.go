package grpcadmit_test

import (
	"context"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/grpcadmit"
)

// The unary client interceptor counts a request that fails to encode in
// this process (a proto3 string holding invalid UTF-8) as a failure of the
// dependency, as its doc says: gRPC fails it with the very code and
// message a server sends when its reply fails to encode, and the call's
// header is nil in both, so nothing the interceptor sees tells them apart.
// Should gRPC come to tell them apart, this test fails, and the count can
// follow.
func TestUnaryClientEncodeFailureLooksLikeTheServers(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	srv.RegisterService(&grpc.ServiceDesc{ServiceName: "test.Bad", HandlerType: (*any)(nil), Methods: []grpc.MethodDesc{{
		MethodName: "Call",
		Handler: func(_ any, _ context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			if err := dec(new(wrapperspb.StringValue)); err != nil {
				return nil, err
			}
			return wrapperspb.String("a\xffb"), nil // a reply that does not encode
		},
	}}}, struct{}{})
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	ev := newEvents()
	ex := newExec(t, nil, ev.listener())
	cc := dial(t, lis.Addr().String(), grpc.WithUnaryInterceptor(grpcadmit.UnaryClientInterceptor(ex)))

	send := func(in string) (*status.Status, metadata.MD, executor.Status) {
		var header metadata.MD
		err := cc.Invoke(context.Background(), "/test.Bad/Call", wrapperspb.String(in), new(wrapperspb.StringValue), grpc.Header(&header))
		return status.Convert(err), header, (<-ev.completed).Status
	}
	local, localHeader, localCount := send("a\xffb")
	remote, remoteHeader, remoteCount := send("x")
	if local.Code() != remote.Code() || local.Message() != remote.Message() || localHeader != nil || remoteHeader != nil {
		t.Errorf("in this process: %v, header %v; from the server: %v, header %v; want them alike", local, localHeader, remote, remoteHeader)
	}
	if localCount != executor.Failed || remoteCount != executor.Failed {
		t.Errorf("counted %v in this process, %v from the server; want both Failed, as documented", localCount, remoteCount)
	}
}
