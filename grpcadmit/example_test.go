package grpcadmit_test

import (
	"context"
	"fmt"
	"net"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/grpcadmit"
	"github.com/groupexec/groupexec/policy"
)

// A server whose calls run under their tenant's limits (the x-tenant
// metadata key); a tenant whose group is shut down gets Unavailable with a
// RetryInfo, the others are served.
func ExampleUnaryServerInterceptor() {
	p, _ := policy.New(policy.WithDefaultMaxConcurrency(4))
	ex, _ := executor.New(p)
	defer ex.Close()

	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(grpcadmit.UnaryServerInterceptor(ex)))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	lis, _ := net.Listen("tcp", "127.0.0.1:0")
	go srv.Serve(lis)
	defer srv.Stop()
	cc, _ := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	defer cc.Close()

	ex.ShutdownGroup(context.Background(), "banned")
	for _, tenant := range []string{"acme", "banned"} {
		ctx := metadata.AppendToOutgoingContext(context.Background(), "x-tenant", tenant)
		resp, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{})
		if err != nil {
			st := status.Convert(err)
			ri := st.Details()[0].(*errdetails.RetryInfo)
			fmt.Printf("%s: %v %q, retry in %v\n", tenant, st.Code(), st.Message(), ri.RetryDelay.AsDuration())
			continue
		}
		fmt.Printf("%s: %v\n", tenant, resp.Status)
	}
	// Output:
	// acme: SERVING
	// banned: Unavailable "shutting down", retry in 1s
}

// A client whose calls are bounded per target: each ClientConn's target is
// a group of its own.
func ExampleUnaryClientInterceptor() {
	p, _ := policy.New(policy.WithDefaultMaxConcurrency(8))
	ex, _ := executor.New(p)
	defer ex.Close()

	srv := grpc.NewServer()
	healthpb.RegisterHealthServer(srv, health.NewServer())
	lis, _ := net.Listen("tcp", "127.0.0.1:0")
	go srv.Serve(lis)
	defer srv.Stop()
	cc, _ := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithChainUnaryInterceptor(grpcadmit.UnaryClientInterceptor(ex)))
	defer cc.Close()

	for range 3 {
		healthpb.NewHealthClient(cc).Check(context.Background(), &healthpb.HealthCheckRequest{})
	}
	s, _ := ex.GroupStats(cc.Target())
	fmt.Println("calls to the target:", s.Succeeded)
	// Output:
	// calls to the target: 3
}

// A client whose streams are bounded per target: a stream holds its slot
// until it ends, so with one slot a second stream to the same target is
// refused while the first is open.
func ExampleStreamClientInterceptor() {
	p, _ := policy.New(policy.WithDefaultMaxInFlight(1))
	ex, _ := executor.New(p)
	defer ex.Close()

	srv := grpc.NewServer()
	healthpb.RegisterHealthServer(srv, health.NewServer())
	lis, _ := net.Listen("tcp", "127.0.0.1:0")
	go srv.Serve(lis)
	defer srv.Stop()
	cc, _ := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithChainStreamInterceptor(grpcadmit.StreamClientInterceptor(ex)))
	defer cc.Close()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel() // ends the stream, and frees its slot
	first, _ := healthpb.NewHealthClient(cc).Watch(ctx, &healthpb.HealthCheckRequest{})
	resp, _ := first.Recv()
	fmt.Println("first:", resp.Status)
	_, err := healthpb.NewHealthClient(cc).Watch(context.Background(), &healthpb.HealthCheckRequest{})
	fmt.Println("second:", status.Code(err))
	// Output:
	// first: SERVING
	// second: ResourceExhausted
}

// A handler behind the interceptors sends its header with SendHeader:
// were its client to close the connection as the header goes out, the
// error it returns would count as the call cancelled, not as a failure
// of its tenant's breaker.
func ExampleSendHeader() {
	p, _ := policy.New(policy.WithDefaultMaxConcurrency(4))
	ex, _ := executor.New(p)
	defer ex.Close()

	srv := grpc.NewServer(
		grpc.ChainStreamInterceptor(grpcadmit.StreamServerInterceptor(ex)),
		grpc.UnknownServiceHandler(func(_ any, ss grpc.ServerStream) error {
			group, _ := executor.GroupFromContext(ss.Context())
			return grpcadmit.SendHeader(ss.Context(), metadata.Pairs("x-served-for", group))
		}),
	)
	lis, _ := net.Listen("tcp", "127.0.0.1:0")
	go srv.Serve(lis)
	defer srv.Stop()
	cc, _ := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	defer cc.Close()

	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-tenant", "acme")
	stream, _ := cc.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, "/example.Any/Call")
	md, err := stream.Header()
	fmt.Println(md.Get("x-served-for"), err)
	// Output:
	// [acme] <nil>
}
