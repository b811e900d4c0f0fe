package grpcadmit_test

import (
	"context"
	"fmt"
	"net"

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

// A server whose streams run under their tenant's limits: a stream holds
// its slot for its whole life, so with one slot per tenant a second stream
// of acme's is refused while its first is open, and globex is served.
func ExampleStreamServerInterceptor() {
	p, _ := policy.New(policy.WithDefaultMaxInFlight(1)) // one stream admitted per tenant
	ex, _ := executor.New(p)
	defer ex.Close()

	srv := grpc.NewServer(grpc.ChainStreamInterceptor(grpcadmit.StreamServerInterceptor(ex)))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	lis, _ := net.Listen("tcp", "127.0.0.1:0")
	go srv.Serve(lis)
	defer srv.Stop()
	cc, _ := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	defer cc.Close()

	watch := func(ctx context.Context, tenant string) {
		ctx = metadata.AppendToOutgoingContext(ctx, "x-tenant", tenant)
		stream, err := healthpb.NewHealthClient(cc).Watch(ctx, &healthpb.HealthCheckRequest{})
		if err == nil {
			var resp *healthpb.HealthCheckResponse
			if resp, err = stream.Recv(); err == nil {
				fmt.Printf("%s: %v\n", tenant, resp.Status)
				return
			}
		}
		fmt.Printf("%s: %v\n", tenant, status.Code(err))
	}
	// Cancelling ctx ends the streams left open, and frees their slots.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	watch(ctx, "acme")   // open: it holds acme's slot
	watch(ctx, "acme")   // refused while the first is open
	watch(ctx, "globex") // another tenant's slot
	// Output:
	// acme: SERVING
	// acme: ResourceExhausted
	// globex: SERVING
}
