package benchmarks

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/grpcadmit"
	"github.com/groupexec/groupexec/httpadmit"
	"github.com/groupexec/groupexec/policy"
)

// The adapters' cost per request over the bare handler. Every request is
// admitted (the limits are never reached), so what is measured is the price
// of admission on the path every request takes: tenant lookup, Do, and the
// adapter's own wrapping. The network benchmarks run many clients over
// loopback (RunParallel with adapterClients goroutines per P), so the
// difference between impl=bare and the adapter is the added cost per request
// seen by a real server; the in-process ones call the handler or
// interceptor directly, which isolates the adapter's own time and
// allocations from the network's noise.

const (
	adapterClients = 8  // goroutines per P in RunParallel: many clients
	adapterTenants = 64 // tenants the clients spread over
)

var adapterTenantKeys = func() []string {
	ks := make([]string, adapterTenants)
	for i := range ks {
		ks[i] = fmt.Sprintf("tenant-%d", i)
	}
	return ks
}()

// adapterExecutor never refuses in these benchmarks: each tenant may run
// more requests than there are clients.
func adapterExecutor(b *testing.B) *executor.Executor {
	b.Helper()
	p, err := policy.New(policy.WithDefaultMaxConcurrency(64), policy.WithDefaultMaxInFlight(128))
	if err != nil {
		b.Fatal(err)
	}
	ex, err := executor.New(p)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ex.Close() })
	return ex
}

var okBody = []byte("ok")

func fastHandler(w http.ResponseWriter, _ *http.Request) { w.Write(okBody) }

// BenchmarkAdaptersHTTP: GET over loopback to an httptest server, bare or
// behind httpadmit.Handler.
func BenchmarkAdaptersHTTP(b *testing.B) {
	for _, impl := range []string{"bare", "httpadmit"} {
		b.Run("impl="+impl, func(b *testing.B) {
			var h http.Handler = http.HandlerFunc(fastHandler)
			if impl == "httpadmit" {
				h = httpadmit.Handler(adapterExecutor(b), h)
			}
			srv := httptest.NewServer(h)
			defer srv.Close()
			tr := &http.Transport{MaxIdleConnsPerHost: 1024}
			defer tr.CloseIdleConnections()
			client := &http.Client{Transport: tr}
			var next atomic.Uint32
			b.ReportAllocs()
			b.SetParallelism(adapterClients)
			b.RunParallel(func(pb *testing.PB) {
				tenant := adapterTenantKeys[next.Add(1)%adapterTenants]
				for pb.Next() {
					req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
					req.Header.Set("X-Tenant", tenant)
					resp, err := client.Do(req)
					if err != nil {
						b.Error(err)
						return
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						b.Errorf("status %d", resp.StatusCode)
						return
					}
				}
			})
		})
	}
}

// discardWriter is a ResponseWriter that keeps nothing, reused by one
// goroutine, so that the in-process benchmark measures only the handlers.
type discardWriter struct{ h http.Header }

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *discardWriter) WriteHeader(int)             {}

// BenchmarkAdaptersHTTPHandler: ServeHTTP called directly, without a network:
// the middleware's own time and allocations. impl=do is Executor.Do alone
// around the handler, with the tenant known and fn bound once per client, so
// that it costs what Do costs and nothing more: the middleware's own part is
// the difference between impl=httpadmit and impl=do.
func BenchmarkAdaptersHTTPHandler(b *testing.B) {
	for _, impl := range []string{"bare", "do", "httpadmit"} {
		b.Run("impl="+impl, func(b *testing.B) {
			ex := adapterExecutor(b)
			var h http.Handler = http.HandlerFunc(fastHandler)
			if impl == "httpadmit" {
				h = httpadmit.Handler(ex, h)
			}
			var next atomic.Uint32
			b.ReportAllocs()
			b.SetParallelism(adapterClients)
			b.RunParallel(func(pb *testing.PB) {
				tenant := adapterTenantKeys[next.Add(1)%adapterTenants]
				req := httptest.NewRequest(http.MethodGet, "/", nil)
				req.Header.Set("X-Tenant", tenant)
				w := &discardWriter{h: http.Header{}}
				fn := func(context.Context) error { fastHandler(w, req); return nil }
				for pb.Next() {
					if impl == "do" {
						ex.Do(req.Context(), tenant, fn)
					} else {
						h.ServeHTTP(w, req)
					}
				}
			})
		})
	}
}

// BenchmarkAdaptersGRPCUnary: a health Check over loopback, bare, through an
// interceptor that only calls the handler (impl=noop: what gRPC's generated
// code costs for any interceptor, its info and handler closure), or through
// grpcadmit.UnaryServerInterceptor.
func BenchmarkAdaptersGRPCUnary(b *testing.B) {
	noop := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		return h(ctx, req)
	}
	for _, impl := range []string{"bare", "noop", "grpcadmit"} {
		b.Run("impl="+impl, func(b *testing.B) {
			var opts []grpc.ServerOption
			switch impl {
			case "noop":
				opts = append(opts, grpc.ChainUnaryInterceptor(noop))
			case "grpcadmit":
				opts = append(opts, grpc.ChainUnaryInterceptor(grpcadmit.UnaryServerInterceptor(adapterExecutor(b))))
			}
			srv := grpc.NewServer(opts...)
			healthpb.RegisterHealthServer(srv, health.NewServer())
			lis, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			go srv.Serve(lis)
			defer srv.Stop()
			cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				b.Fatal(err)
			}
			defer cc.Close()
			client := healthpb.NewHealthClient(cc)
			var next atomic.Uint32
			b.ReportAllocs()
			b.SetParallelism(adapterClients)
			b.RunParallel(func(pb *testing.PB) {
				ctx := metadata.AppendToOutgoingContext(context.Background(), "x-tenant", adapterTenantKeys[next.Add(1)%adapterTenants])
				req := &healthpb.HealthCheckRequest{}
				for pb.Next() {
					if _, err := client.Check(ctx, req); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkAdaptersGRPCInterceptor: the unary server interceptor called
// directly with a context carrying x-tenant, against calling the handler, and
// against Executor.Do around the handler with the tenant known and fn bound
// once per client: the interceptor's own time and allocations are the
// difference between impl=grpcadmit and impl=do.
func BenchmarkAdaptersGRPCInterceptor(b *testing.B) {
	handler := func(ctx context.Context, req any) (any, error) { return req, nil }
	info := &grpc.UnaryServerInfo{FullMethod: "/bench/Call"}
	for _, impl := range []string{"bare", "do", "grpcadmit"} {
		b.Run("impl="+impl, func(b *testing.B) {
			ex := adapterExecutor(b)
			icp := grpcadmit.UnaryServerInterceptor(ex)
			var next atomic.Uint32
			b.ReportAllocs()
			b.SetParallelism(adapterClients)
			b.RunParallel(func(pb *testing.PB) {
				tenant := adapterTenantKeys[next.Add(1)%adapterTenants]
				ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("x-tenant", tenant))
				req := &healthpb.HealthCheckRequest{}
				fn := func(ctx context.Context) error { _, err := handler(ctx, req); return err }
				for pb.Next() {
					var err error
					switch impl {
					case "bare":
						_, err = handler(ctx, req)
					case "do":
						err = ex.Do(ctx, tenant, fn)
					default:
						_, err = icp(ctx, req, info, handler)
					}
					if err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkAdaptersGRPCClient: the unary client interceptor called directly
// with an invoker that returns at once, against the invoker alone and
// Executor.Do around it (one group, the connection's target, as the
// interceptor uses by default).
func BenchmarkAdaptersGRPCClient(b *testing.B) {
	invoker := func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error { return nil }
	for _, impl := range []string{"bare", "do", "grpcadmit"} {
		b.Run("impl="+impl, func(b *testing.B) {
			ex := adapterExecutor(b)
			icp := grpcadmit.UnaryClientInterceptor(ex)
			cc, err := grpc.NewClient("passthrough:///bench", grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				b.Fatal(err)
			}
			defer cc.Close()
			b.ReportAllocs()
			b.SetParallelism(adapterClients)
			b.RunParallel(func(pb *testing.PB) {
				ctx := context.Background()
				req := &healthpb.HealthCheckRequest{}
				reply := &healthpb.HealthCheckResponse{}
				fn := func(ctx context.Context) error { return invoker(ctx, "/bench/Call", req, reply, cc) }
				for pb.Next() {
					var err error
					switch impl {
					case "bare":
						err = invoker(ctx, "/bench/Call", req, reply, cc)
					case "do":
						err = ex.Do(ctx, cc.Target(), fn)
					default:
						err = icp(ctx, "/bench/Call", req, reply, cc, invoker)
					}
					if err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
