package grpcadmit_test

import (
	"context"
	"errors"
	"io"
	"net"
	"runtime"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/grpcadmit"
	"github.com/groupexec/groupexec/internal/adaptertest"
	"github.com/groupexec/groupexec/policy"
)

// streams is the test service of the stream client interceptor's tests.
// Echo sends back what it receives until the client closes its side; Sum
// (a client-streaming call) answers once, after the client's side is
// closed; Fail ends with Unavailable at once; Hold waits for the call's
// end. Each tells opened when it starts.
type streams struct{ opened chan string }

var streamsDesc = grpc.ServiceDesc{
	ServiceName: "test.Streams",
	HandlerType: (*any)(nil),
	Streams: []grpc.StreamDesc{{
		StreamName: "Echo",
		Handler: func(srv any, ss grpc.ServerStream) error {
			srv.(*streams).opened <- "echo"
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
		},
		ServerStreams: true,
		ClientStreams: true,
	}, {
		StreamName: "Sum",
		Handler: func(srv any, ss grpc.ServerStream) error {
			srv.(*streams).opened <- "sum"
			n := 0
			for {
				if err := ss.RecvMsg(new(wrapperspb.StringValue)); err != nil {
					if errors.Is(err, io.EOF) {
						return ss.SendMsg(wrapperspb.Int64(int64(n)))
					}
					return err
				}
				n++
			}
		},
		ClientStreams: true,
	}, {
		StreamName: "Fail",
		Handler: func(srv any, ss grpc.ServerStream) error {
			srv.(*streams).opened <- "fail"
			return status.Error(codes.Unavailable, "down")
		},
		ServerStreams: true,
	}, {
		StreamName: "Hold",
		Handler: func(srv any, ss grpc.ServerStream) error {
			srv.(*streams).opened <- "hold"
			<-ss.Context().Done()
			return nil
		},
		ServerStreams: true,
	}},
}

// startStreams serves the streams service on a loopback port and returns
// its address and the channel its calls tell their start on.
func startStreams(t *testing.T) (string, chan string) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &streams{opened: make(chan string, 100)}
	srv := grpc.NewServer()
	srv.RegisterService(&streamsDesc, s)
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	return lis.Addr().String(), s.opened
}

// streamClient is a stream client interceptor's executor, one slot per
// target, with its events, and a ClientConn to the streams service through
// the interceptor.
func streamClient(t *testing.T, eopts ...executor.Option) (*executor.Executor, *events, *grpc.ClientConn, chan string) {
	t.Helper()
	ev := newEvents()
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxInFlight(1)}, append(eopts, ev.listener())...)
	addr, opened := startStreams(t)
	cc := dial(t, addr, grpc.WithChainStreamInterceptor(grpcadmit.StreamClientInterceptor(ex)))
	return ex, ev, cc, opened
}

func newStream(ctx context.Context, cc *grpc.ClientConn, name string, server, client bool) (grpc.ClientStream, error) {
	desc := &grpc.StreamDesc{StreamName: name, ServerStreams: server, ClientStreams: client}
	return cc.NewStream(ctx, desc, "/test.Streams/"+name)
}

// slots returns the permits of group held now.
func slots(ex *executor.Executor, group string) int {
	s, _ := ex.GroupStats(group)
	return s.InFlight
}

// completed waits for the completion of the one stream, and checks that no
// other was told.
func completed(t *testing.T, ev *events) executor.Event {
	t.Helper()
	e := <-ev.completed
	select {
	case extra := <-ev.completed:
		t.Errorf("a second completion: %+v", extra)
	default:
	}
	return e
}

// A stream holds its slot while it is open: a second stream to the same
// target is refused, unsent, with ResourceExhausted. Closing the sending
// side, then reading to io.EOF, frees it by the time RecvMsg returns.
func TestStreamClientHoldsUntilEOF(t *testing.T) {
	ex, ev, cc, opened := streamClient(t)
	cs, err := newStream(context.Background(), cc, "Echo", true, true)
	if err != nil {
		t.Fatal(err)
	}
	<-opened
	if _, err := newStream(context.Background(), cc, "Echo", true, true); status.Code(err) != codes.ResourceExhausted || !errors.Is(err, executor.ErrRejected) {
		t.Fatalf("second stream: %v, want ResourceExhausted", err)
	}
	if err := cs.SendMsg(wrapperspb.String("x")); err != nil {
		t.Fatal(err)
	}
	out := new(wrapperspb.StringValue)
	if err := cs.RecvMsg(out); err != nil || out.Value != "x" {
		t.Fatalf("echo: %q, %v", out.Value, err)
	}
	if n := slots(ex, cc.Target()); n != 1 {
		t.Fatalf("%d slots held by an open stream, want 1", n)
	}
	if err := cs.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if err := cs.RecvMsg(out); err != io.EOF {
		t.Fatalf("RecvMsg after CloseSend: %v, want io.EOF", err)
	}
	if n := slots(ex, cc.Target()); n != 0 {
		t.Errorf("%d slots held once RecvMsg returned io.EOF", n)
	}
	if e := completed(t, ev); e.Status != executor.Success {
		t.Errorf("completed %v (%v), want Success", e.Status, e.Err)
	}
	if err := cs.RecvMsg(out); err == nil {
		t.Error("RecvMsg after the end returned nil")
	}
	if s, _ := ex.GroupStats(cc.Target()); s.Succeeded != 1 || s.InFlight != 0 {
		t.Errorf("%+v, want one success and nothing held", s)
	}
}

// A client-streaming call ends when RecvMsg returns its one reply
// (CloseAndRecv): gRPC has read the status too.
func TestStreamClientClientStreamingEndsAtTheReply(t *testing.T) {
	ex, ev, cc, _ := streamClient(t)
	cs, err := newStream(context.Background(), cc, "Sum", false, true)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := cs.SendMsg(wrapperspb.String("x")); err != nil {
			t.Fatal(err)
		}
	}
	if err := cs.CloseSend(); err != nil {
		t.Fatal(err)
	}
	out := new(wrapperspb.Int64Value)
	if err := cs.RecvMsg(out); err != nil || out.Value != 3 {
		t.Fatalf("sum: %d, %v", out.Value, err)
	}
	if n := slots(ex, cc.Target()); n != 0 {
		t.Errorf("%d slots held once the reply was in", n)
	}
	if e := completed(t, ev); e.Status != executor.Success {
		t.Errorf("completed %v (%v), want Success", e.Status, e.Err)
	}
}

// RecvMsg returning the call's error status ends the stream: the slot is
// free, and the error counts by ClientFailure.
func TestStreamClientRecvErrorEndsTheStream(t *testing.T) {
	ex, ev, cc, _ := streamClient(t)
	cs, err := newStream(context.Background(), cc, "Fail", true, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := cs.SendMsg(wrapperspb.String("x")); err != nil && err != io.EOF {
		t.Fatal(err)
	}
	if err := cs.RecvMsg(new(wrapperspb.StringValue)); status.Code(err) != codes.Unavailable {
		t.Fatalf("RecvMsg: %v, want Unavailable", err)
	}
	if n := slots(ex, cc.Target()); n != 0 {
		t.Errorf("%d slots held once RecvMsg returned the error", n)
	}
	if e := completed(t, ev); e.Status != executor.Failed {
		t.Errorf("completed %v (%v), want Failed", e.Status, e.Err)
	}
}

// Cancelling the stream's context frees its slot, whether a RecvMsg is
// waiting or the stream was never used after its creation; the stream
// counts as Cancelled.
func TestStreamClientContextEndFreesTheSlot(t *testing.T) {
	for _, receiving := range []bool{true, false} {
		ex, ev, cc, opened := streamClient(t)
		ctx, cancel := context.WithCancel(context.Background())
		cs, err := newStream(ctx, cc, "Hold", true, false)
		if err != nil {
			t.Fatal(err)
		}
		recv := make(chan error, 1)
		if receiving {
			if err := cs.SendMsg(wrapperspb.String("x")); err != nil {
				t.Fatal(err)
			}
			<-opened
			go func() { recv <- cs.RecvMsg(new(wrapperspb.StringValue)) }()
		}
		cancel()
		if e := <-ev.completed; e.Status != executor.Cancelled {
			t.Errorf("receiving %v: completed %v (%v), want Cancelled", receiving, e.Status, e.Err)
		}
		if n := slots(ex, cc.Target()); n != 0 {
			t.Errorf("receiving %v: %d slots held after the context ended", receiving, n)
		}
		if receiving {
			if err := <-recv; status.Code(err) != codes.Canceled {
				t.Errorf("RecvMsg: %v, want Canceled", err)
			}
		}
		select {
		case e := <-ev.completed:
			t.Errorf("receiving %v: a second completion: %+v", receiving, e)
		default:
		}
	}
}

// Closing the ClientConn ends its streams: gRPC frees them without the
// caller reading them, and so is the slot freed.
func TestStreamClientConnCloseFreesTheSlot(t *testing.T) {
	ex, ev, cc, _ := streamClient(t)
	if _, err := newStream(context.Background(), cc, "Hold", true, false); err != nil {
		t.Fatal(err)
	}
	cc.Close()
	if e := completed(t, ev); e.Status != executor.Cancelled {
		t.Errorf("completed %v (%v), want Cancelled", e.Status, e.Err)
	}
	if n := slots(ex, cc.Target()); n != 0 {
		t.Errorf("%d slots held after the ClientConn closed", n)
	}
}

// A stream whose creation fails, or panics, gives its slot back before the
// interceptor returns; the failure counts as one.
func TestStreamClientFailedCreationFreesTheSlot(t *testing.T) {
	ev := newEvents()
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxInFlight(1)}, ev.listener())
	icp := grpcadmit.StreamClientInterceptor(ex, grpcadmit.WithTenantFunc(func(context.Context) (string, error) { return "a", nil }))
	desc := &grpc.StreamDesc{ServerStreams: true}
	down := status.Error(codes.Unavailable, "no connection")
	_, err := icp(context.Background(), desc, nil, "/t.S/M", func(context.Context, *grpc.StreamDesc, *grpc.ClientConn, string, ...grpc.CallOption) (grpc.ClientStream, error) {
		return nil, down
	})
	if err != down {
		t.Fatalf("got %v, want the streamer's error", err)
	}
	if n := slots(ex, "a"); n != 0 {
		t.Errorf("%d slots held after a failed creation", n)
	}
	if e := completed(t, ev); e.Status != executor.Failed {
		t.Errorf("completed %v (%v), want Failed", e.Status, e.Err)
	}

	func() {
		defer func() {
			if v := recover(); v != "streamer broke" {
				t.Errorf("recovered %v", v)
			}
		}()
		icp(context.Background(), desc, nil, "/t.S/M", func(context.Context, *grpc.StreamDesc, *grpc.ClientConn, string, ...grpc.CallOption) (grpc.ClientStream, error) {
			panic("streamer broke")
		})
	}()
	if n := slots(ex, "a"); n != 0 {
		t.Errorf("%d slots held after a creation panicked", n)
	}
	if e := completed(t, ev); e.Status != executor.Failed {
		t.Errorf("completed %v (%v), want Failed", e.Status, e.Err)
	}
}

// A stream refused in this process is never created, and a stream client
// interceptor chained before the one that refused it counts it Cancelled.
func TestStreamClientRefusalIsNotCreated(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxInFlight(1)})
	free := adaptertest.FillSlot(t, ex, "a")
	defer free()
	outer := newExec(t, nil)
	tenantA := grpcadmit.WithTenantFunc(func(context.Context) (string, error) { return "a", nil })
	outerIcp := grpcadmit.StreamClientInterceptor(outer, tenantA)
	innerIcp := grpcadmit.StreamClientInterceptor(ex, tenantA)
	desc := &grpc.StreamDesc{ServerStreams: true}
	created := false
	_, err := outerIcp(context.Background(), desc, nil, "/t.S/M", func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		return innerIcp(ctx, desc, cc, method, func(context.Context, *grpc.StreamDesc, *grpc.ClientConn, string, ...grpc.CallOption) (grpc.ClientStream, error) {
			created = true
			return nil, nil
		}, opts...)
	})
	var re *grpcadmit.RefusalError
	if created || status.Code(err) != codes.ResourceExhausted || !errors.As(err, &re) {
		t.Fatalf("created %v, error %v; want a ResourceExhausted *RefusalError, not created", created, err)
	}
	if s, _ := outer.GroupStats("a"); s.Cancelled != 1 || s.Failed != 0 || s.InFlight != 0 {
		t.Errorf("outer group: %+v, want 1 cancelled", s)
	}
}

// A rejection handler that calls runtime.Goexit on the goroutine that
// holds an outgoing stream's admission ends the interceptor's caller too,
// as it ends a unary call's caller, on whose goroutine it runs: the caller
// is not left waiting for ever for an admission that will never be told.
func TestStreamClientRejectionHandlerGoexit(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxInFlight(1)},
		executor.WithRejectionHandler(func(*executor.Rejection) error {
			runtime.Goexit()
			return nil
		}))
	defer adaptertest.FillSlot(t, ex, "a")()
	icp := grpcadmit.StreamClientInterceptor(ex, grpcadmit.WithTenantFunc(func(context.Context) (string, error) { return "a", nil }))
	ended, returned := make(chan struct{}), false
	go func() {
		defer close(ended)
		_, _ = icp(context.Background(), &grpc.StreamDesc{}, nil, "/t.S/M",
			func(context.Context, *grpc.StreamDesc, *grpc.ClientConn, string, ...grpc.CallOption) (grpc.ClientStream, error) {
				t.Error("a refused stream was created")
				return nil, errors.New("refused")
			})
		returned = true
	}()
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the interceptor's caller is still blocked 10s after the rejection handler called runtime.Goexit")
	}
	if returned {
		t.Error("the interceptor returned; want its caller's goroutine to exit, as the rejection handler's did")
	}
}

// A stream context whose code panics where the goroutine that holds the
// stream's admission calls it (its Err and Value, as the executor asks
// them) does not crash the process from a goroutine no one can recover
// on: the panic goes on to the interceptor's caller, as it does for a
// unary call, no stream is created and no slot kept.
func TestStreamClientContextPanics(t *testing.T) {
	for _, method := range []string{"Value", "Err"} {
		t.Run(method, func(t *testing.T) {
			ex := newExec(t, []policy.Option{policy.WithDefaultMaxInFlight(1)})
			icp := grpcadmit.StreamClientInterceptor(ex, grpcadmit.WithTenantFunc(func(context.Context) (string, error) { return "a", nil }))
			ctx := &adaptertest.Panicking{Method: method, Panic: "context broke"}
			func() {
				defer func() {
					if v := recover(); v != "context broke" {
						t.Errorf("recovered %v, want %q", v, "context broke")
					}
				}()
				_, _ = icp(ctx, &grpc.StreamDesc{}, nil, "/t.S/M",
					func(context.Context, *grpc.StreamDesc, *grpc.ClientConn, string, ...grpc.CallOption) (grpc.ClientStream, error) {
						t.Error("a stream whose context panicked was created")
						return nil, errors.New("created")
					})
			}()
			if s := ex.Stats(); s.Running != 0 || s.Waiting != 0 {
				t.Errorf("%d running, %d waiting; want no slot kept", s.Running, s.Waiting)
			}
		})
	}
}

// A stream context that panics in the stream's admission run on another
// goroutine by a rejection handler (RunInCaller), which recovers it, does
// not leave the interceptor's caller waiting for ever to be told the
// admission's outcome: the panic goes on to the caller.
func TestStreamClientContextPanicsInRunInCaller(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxInFlight(1)},
		executor.WithRejectionHandler(adaptertest.RunElsewhere))
	defer adaptertest.FillSlot(t, ex, "a")()
	icp := grpcadmit.StreamClientInterceptor(ex, grpcadmit.WithTenantFunc(func(context.Context) (string, error) { return "a", nil }))
	ctx := &adaptertest.Panicking{Method: "Value", Panic: "context broke"}
	ended := make(chan any, 1)
	go func() {
		defer func() { ended <- recover() }()
		_, _ = icp(ctx, &grpc.StreamDesc{}, nil, "/t.S/M",
			func(context.Context, *grpc.StreamDesc, *grpc.ClientConn, string, ...grpc.CallOption) (grpc.ClientStream, error) {
				t.Error("a stream whose context panicked was created")
				return nil, errors.New("created")
			})
	}()
	select {
	case v := <-ended:
		if v != "context broke" {
			t.Errorf("recovered %v, want %q", v, "context broke")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the interceptor's caller is still blocked 10s after the stream's context panicked")
	}
}
