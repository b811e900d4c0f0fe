package grpcadmit_test

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

func newExec(t testing.TB, popts []policy.Option, eopts ...executor.Option) *executor.Executor {
	t.Helper()
	p, err := policy.New(popts...)
	if err != nil {
		t.Fatal(err)
	}
	ex, err := executor.New(p, eopts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ex.Close() })
	return ex
}

// events turns listener calls into channels a test waits on.
type events struct {
	submitted, started, completed chan executor.Event
}

func newEvents() *events {
	return &events{make(chan executor.Event, 1000), make(chan executor.Event, 1000), make(chan executor.Event, 1000)}
}

func (e *events) listener() executor.Option {
	return executor.WithListener(executor.ListenerFuncs{
		Submitted: func(ev executor.Event) { e.submitted <- ev },
		Started:   func(ev executor.Event) { e.started <- ev },
		Completed: func(ev executor.Event) { e.completed <- ev },
	})
}

// gate is the test service: Call counts the calls running in it and holds
// each until release (or answers at once with open); Echo streams back what
// it receives until the client closes its side.
type gate struct {
	running, max, served atomic.Int64
	entered              chan string // each call's request value
	hold                 chan struct{}
	once                 sync.Once
	reply                func(ctx context.Context, in string) error // nil: answer
}

func newGate() *gate { return &gate{entered: make(chan string, 1000), hold: make(chan struct{})} }

func (g *gate) release() { g.once.Do(func() { close(g.hold) }) }

func (g *gate) call(ctx context.Context, in *wrapperspb.StringValue) (*wrapperspb.StringValue, error) {
	n := g.running.Add(1)
	for m := g.max.Load(); n > m && !g.max.CompareAndSwap(m, n); m = g.max.Load() {
	}
	defer g.running.Add(-1)
	g.entered <- in.Value
	if g.reply != nil {
		if err := g.reply(ctx, in.Value); err != nil {
			return nil, err
		}
	}
	<-g.hold
	g.served.Add(1)
	return wrapperspb.String("ok " + in.Value), nil
}

func (g *gate) echo(ss grpc.ServerStream) error {
	g.entered <- "stream"
	for {
		in := new(wrapperspb.StringValue)
		if err := ss.RecvMsg(in); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if err := ss.SendMsg(in); err != nil {
			return err
		}
	}
}

var gateDesc = grpc.ServiceDesc{
	ServiceName: "test.Gate",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Call",
		Handler: func(srv any, ctx context.Context, dec func(any) error, icp grpc.UnaryServerInterceptor) (any, error) {
			in := new(wrapperspb.StringValue)
			if err := dec(in); err != nil {
				return nil, err
			}
			h := func(ctx context.Context, req any) (any, error) {
				return srv.(*gate).call(ctx, req.(*wrapperspb.StringValue))
			}
			if icp == nil {
				return h(ctx, in)
			}
			return icp(ctx, in, &grpc.UnaryServerInfo{Server: srv, FullMethod: "/test.Gate/Call"}, h)
		},
	}},
	Streams: []grpc.StreamDesc{{
		StreamName:    "Echo",
		Handler:       func(srv any, ss grpc.ServerStream) error { return srv.(*gate).echo(ss) },
		ServerStreams: true,
		ClientStreams: true,
	}, {
		StreamName: "Wait",
		Handler: func(srv any, ss grpc.ServerStream) error {
			srv.(*gate).entered <- "wait"
			<-ss.Context().Done()
			return status.FromContextError(ss.Context().Err()).Err()
		},
		ServerStreams: true,
	}, {
		// First is server-streaming: its handler receives the one request,
		// as generated code does, and answers it (or with reply's error).
		StreamName: "First",
		Handler: func(srv any, ss grpc.ServerStream) error {
			in := new(wrapperspb.StringValue)
			if err := ss.RecvMsg(in); err != nil {
				return err
			}
			if g := srv.(*gate); g.reply != nil {
				if err := g.reply(ss.Context(), in.Value); err != nil {
					return err
				}
			}
			return ss.SendMsg(in)
		},
		ServerStreams: true,
	}},
}

// start serves g on a loopback port with opts and returns its address.
func start(t *testing.T, g *gate, opts ...grpc.ServerOption) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(opts...)
	srv.RegisterService(&gateDesc, g)
	go srv.Serve(lis)
	t.Cleanup(func() { g.release(); srv.Stop() })
	return lis.Addr().String()
}

func dial(t *testing.T, target string, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient(target, append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

// call invokes Call as tenant ("" for no x-tenant).
func call(ctx context.Context, cc *grpc.ClientConn, tenant, value string) (string, error) {
	if tenant != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "x-tenant", tenant)
	}
	out := new(wrapperspb.StringValue)
	err := cc.Invoke(ctx, "/test.Gate/Call", wrapperspb.String(value), out)
	return out.Value, err
}
