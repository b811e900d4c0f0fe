// Command grpcservice is a real gRPC service with the admission interceptor
// (package grpcadmit) in front of its method and the executor's numbers
// exported through OpenTelemetry (package metrics/otel): one tenant floods it
// while three others send a light load. The flood is refused
// (ResourceExhausted) at its own limits while every light call is served,
// and the OpenTelemetry counters agree with what the clients saw.
//
//	go run ./examples/grpcservice
//
// The server listens on a loopback port chosen by the system; the clients are
// in the same process and tell the server their tenant in the x-tenant
// metadata key. It exits non-zero if isolation did not hold (a light tenant
// refused or failed, or the flood never refused) or if the counters disagree
// with the clients. The verdict is taken from counts, not latencies, so a
// loaded machine changes the numbers but not the verdict.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/grpcadmit"
	gotel "github.com/groupexec/groupexec/metrics/otel"
	"github.com/groupexec/groupexec/policy"
)

const (
	duration     = 3 * time.Second
	work         = 5 * time.Millisecond // what the service spends on a call
	floodWorkers = 8                    // the flood's clients, back to back
	lightPause   = 20 * time.Millisecond
	method       = "/demo.Work/Run"
)

var tenants = []string{"flood", "alpha", "bravo", "charlie"}

func main() {
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "grpcservice:", err)
		os.Exit(1)
	}
}

func run(out io.Writer) error {
	pol, err := policy.New(
		policy.WithGlobalMaxInFlight(4),     // the service runs 4 calls at once, all tenants together
		policy.WithDefaultMaxConcurrency(2), // a tenant runs at most 2
		policy.WithDefaultMaxInFlight(4),    // and holds at most 4 admitted (2 waiting)
		policy.WithQueueTimeout(2*time.Second),
	)
	if err != nil {
		return err
	}
	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer provider.Shutdown(context.Background())
	col, err := gotel.New(provider, gotel.Options{})
	if err != nil {
		return err
	}
	ex, err := executor.New(pol, executor.WithListener(col))
	if err != nil {
		return err
	}
	defer ex.Close()
	col.Observe(ex)

	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(grpcadmit.UnaryServerInterceptor(ex)))
	srv.RegisterService(&workService, nil)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	defer srv.Stop()
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer cc.Close()
	fmt.Fprintf(out, "service on %s, %v per call\n%s\n", lis.Addr(), work, pol)
	fmt.Fprintf(out, "%q calls with %d clients back to back; %v each make one call every %v\n\n",
		tenants[0], floodWorkers, tenants[1:], lightPause)

	// The clients stop between calls, not by cancelling one under way, so
	// that every call the server counts is one a client counted too.
	var stop atomic.Bool
	st := &stats{by: map[string]*tally{}}
	for _, t := range tenants {
		st.by[t] = &tally{}
	}
	var wg sync.WaitGroup
	for range floodWorkers {
		wg.Go(func() { load(cc, tenants[0], 0, &stop, st) })
	}
	for _, t := range tenants[1:] {
		wg.Go(func() { load(cc, t, lightPause, &stop, st) })
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for sec := 1; sec <= int(duration/time.Second); sec++ {
		<-tick.C
		st.print(out, sec, ex)
	}
	stop.Store(true)
	wg.Wait()
	srv.GracefulStop()
	if err := <-served; err != nil {
		return err
	}

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		return err
	}
	return st.summary(out, counters(rm))
}

// workService is the service's one method, written out by hand as protoc's
// generated code would: it takes and returns an empty message, and spends
// work on each call. The interceptor grpc passes is the admission's.
var workService = grpc.ServiceDesc{
	ServiceName: "demo.Work",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Run",
		Handler: func(srv any, ctx context.Context, dec func(any) error, icpt grpc.UnaryServerInterceptor) (any, error) {
			in := new(emptypb.Empty)
			if err := dec(in); err != nil {
				return nil, err
			}
			if icpt == nil {
				return runWork(ctx, in)
			}
			return icpt(ctx, in, &grpc.UnaryServerInfo{Server: srv, FullMethod: method}, runWork)
		},
	}},
}

// runWork is the method's handler: it runs only once the call is admitted.
func runWork(ctx context.Context, _ any) (any, error) {
	select {
	case <-time.After(work):
		return new(emptypb.Empty), nil
	case <-ctx.Done():
		return nil, status.FromContextError(ctx.Err()).Err()
	}
}

// load calls the method as tenant until stop, pausing between calls.
func load(cc *grpc.ClientConn, tenant string, pause time.Duration, stop *atomic.Bool, st *stats) {
	for !stop.Load() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		ctx = metadata.AppendToOutgoingContext(ctx, grpcadmit.DefaultTenantKey, tenant)
		err := cc.Invoke(ctx, method, new(emptypb.Empty), new(emptypb.Empty))
		cancel()
		st.record(tenant, status.Code(err))
		if pause > 0 {
			time.Sleep(pause)
		}
	}
}

// tally is what one tenant's clients saw.
type tally struct {
	served, refused, failed int
}

type stats struct {
	mu sync.Mutex
	by map[string]*tally
}

func (s *stats) record(tenant string, code codes.Code) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.by[tenant]
	switch code {
	case codes.OK:
		t.served++
	case codes.ResourceExhausted:
		t.refused++
	default:
		t.failed++
	}
}

// print writes one table: totals so far, levels now.
func (s *stats) print(out io.Writer, sec int, ex *executor.Executor) {
	s.mu.Lock()
	defer s.mu.Unlock()
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "t=%ds\ttenant\tserved\trefused\trunning\twaiting\t\n", sec)
	for _, name := range tenants {
		t := s.by[name]
		gs, _ := ex.GroupStats(name)
		fmt.Fprintf(tw, "\t%s\t%d\t%d\t%d\t%d\t\n", name, t.served, t.refused, gs.RunningTasks, gs.Waiting)
	}
	tw.Flush()
	fmt.Fprintln(out)
}

// exported is what the OpenTelemetry counters say of one tenant.
type exported struct{ succeeded, rejected int64 }

// counters reads group_completed_total{status="success"} and
// group_rejected_total (every limit) per group from a collection.
func counters(rm metricdata.ResourceMetrics) map[string]*exported {
	by := map[string]*exported{}
	at := func(pt metricdata.DataPoint[int64]) *exported {
		g, _ := pt.Attributes.Value("group")
		e := by[g.AsString()]
		if e == nil {
			e = &exported{}
			by[g.AsString()] = e
		}
		return e
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			sum, ok := m.Data.(metricdata.Sum[int64])
			if !ok {
				continue
			}
			for _, pt := range sum.DataPoints {
				switch m.Name {
				case "group_completed_total":
					if s, _ := pt.Attributes.Value("status"); s.AsString() == "success" {
						at(pt).succeeded += pt.Value
					}
				case "group_rejected_total":
					at(pt).rejected += pt.Value
				}
			}
		}
	}
	return by
}

// summary says what the run showed, and fails unless the flood was refused
// while every light call was served, and the exported counters match the
// clients' counts.
func (s *stats) summary(out io.Writer, exp map[string]*exported) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	flood := s.by[tenants[0]]
	isolated := flood.refused > 0 && flood.served > 0
	agree := true
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "tenant\tserved\trefused\tfailed\tgroup_completed_total{status=success}\tgroup_rejected_total\t\n")
	for i, name := range tenants {
		t, e := s.by[name], exp[name]
		if e == nil {
			e = &exported{}
		}
		if i > 0 {
			isolated = isolated && t.refused == 0 && t.failed == 0 && t.served > 0
		}
		agree = agree && e.succeeded == int64(t.served) && e.rejected == int64(t.refused)
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t\n", name, t.served, t.refused, t.failed, e.succeeded, e.rejected)
	}
	tw.Flush()
	if !isolated {
		return errors.New("isolation did not hold: the flood was never refused, or a light call was refused or failed")
	}
	if !agree {
		return errors.New("the OpenTelemetry counters disagree with the calls the clients saw served and refused")
	}
	fmt.Fprintln(out, "isolation held: the flood was refused (ResourceExhausted) at its own limits, every light call was served;")
	fmt.Fprintln(out, "the OpenTelemetry counters agree with the clients")
	return nil
}
