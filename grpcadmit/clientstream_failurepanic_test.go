package grpcadmit_test

import (
	"context"
	"errors"
	"runtime"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/grpcadmit"
	"github.com/groupexec/groupexec/policy"
)

// endingStream is a stream whose RecvMsg ends it with err, as gRPC's does
// with the call's status; its other methods succeed.
type endingStream struct {
	grpc.ClientStream
	err error
}

func (s endingStream) RecvMsg(any) error { return s.err }
func (s endingStream) CloseSend() error  { return nil }

// judgePanicking returns a stream client interceptor, one slot, whose
// WithFailure function panics with "judge broke", or calls runtime.Goexit,
// for every error it judges, and its events.
func judgePanicking(t *testing.T, exit bool) (grpc.StreamClientInterceptor, *executor.Executor, *events) {
	t.Helper()
	ev := newEvents()
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxInFlight(1)}, ev.listener())
	icp := grpcadmit.StreamClientInterceptor(ex,
		grpcadmit.WithTenantFunc(func(context.Context) (string, error) { return "a", nil }),
		grpcadmit.WithFailure(func(error) bool {
			if exit {
				runtime.Goexit()
			}
			panic("judge broke")
		}))
	return icp, ex, ev
}

// recovering calls f on a goroutine of its own and returns what it
// recovered, and whether f returned (false: its goroutine was exited).
func recovering(f func()) (recovered any, returned bool) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() { recovered = recover() }()
		f()
		returned = true
	}()
	<-done
	return recovered, returned
}

// WithFailure's function judges a client stream's end on the goroutine
// that holds its slot, where no one could recover its panic. The panic
// goes on to the stream's caller, as a unary call's does, from the method
// that reports the end; the slot is free, and the stream counts as failed
// with the panic's value. A runtime.Goexit there ends the caller's
// goroutine likewise.
func TestStreamClientFailurePanicReachesTheCaller(t *testing.T) {
	for _, exit := range []bool{false, true} {
		t.Run(map[bool]string{false: "panic", true: "goexit"}[exit], func(t *testing.T) {
			icp, ex, ev := judgePanicking(t, exit)
			ended := status.Error(codes.Unavailable, "down")
			cs, err := icp(context.Background(), &grpc.StreamDesc{ServerStreams: true}, nil, "/t.S/M",
				func(context.Context, *grpc.StreamDesc, *grpc.ClientConn, string, ...grpc.CallOption) (grpc.ClientStream, error) {
					return endingStream{err: ended}, nil
				})
			if err != nil {
				t.Fatal(err)
			}
			recovered, returned := recovering(func() { cs.RecvMsg(nil) })
			if exit {
				if returned || recovered != nil {
					t.Errorf("RecvMsg returned %v, recovered %v; want its goroutine exited", returned, recovered)
				}
			} else if recovered != "judge broke" {
				t.Errorf("RecvMsg's caller recovered %v (returned %v), want the WithFailure function's panic", recovered, returned)
			}
			if n := slots(ex, "a"); n != 0 {
				t.Errorf("%d slots held after the stream ended", n)
			}
			e := completed(t, ev)
			if e.Status != executor.Failed {
				t.Errorf("completed %v (%v), want Failed", e.Status, e.Err)
			}
			var pe *executor.PanicError
			if !exit && (!errors.As(e.Err, &pe) || pe.Value != "judge broke") {
				t.Errorf("completed with %v, want a *executor.PanicError with the panic's value", e.Err)
			}
			// Raised once: the stream's next call returns.
			if recovered, returned := recovering(func() { cs.RecvMsg(nil) }); !returned {
				t.Errorf("a second RecvMsg did not return (recovered %v)", recovered)
			}
		})
	}
}

// A stream that gRPC ended on its own goroutine (OnFinish: its context
// ended, its ClientConn closed) has its end judged there, with no caller
// in a method of the stream: the panic goes on to the caller on its next
// call of the stream, once.
func TestStreamClientFailurePanicAfterOnFinishReachesTheNextCall(t *testing.T) {
	icp, ex, ev := judgePanicking(t, false)
	var finish func(error)
	cs, err := icp(context.Background(), &grpc.StreamDesc{ServerStreams: true}, nil, "/t.S/M",
		func(_ context.Context, _ *grpc.StreamDesc, _ *grpc.ClientConn, _ string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			for _, o := range opts {
				if f, ok := o.(grpc.OnFinishCallOption); ok {
					finish = f.OnFinish
				}
			}
			return endingStream{err: status.Error(codes.Unavailable, "closing")}, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	if finish == nil {
		t.Fatal("the interceptor passed no OnFinish call option")
	}
	finish(status.Error(codes.Unavailable, "closing")) // as gRPC calls it
	if e := completed(t, ev); e.Status != executor.Failed {
		t.Errorf("completed %v (%v), want Failed", e.Status, e.Err)
	}
	if n := slots(ex, "a"); n != 0 {
		t.Errorf("%d slots held after the stream ended", n)
	}
	if recovered, _ := recovering(func() { cs.CloseSend() }); recovered != "judge broke" {
		t.Errorf("CloseSend's caller recovered %v, want the WithFailure function's panic", recovered)
	}
	if recovered, returned := recovering(func() { cs.RecvMsg(nil) }); !returned {
		t.Errorf("the next RecvMsg did not return (recovered %v): the panic goes on once", recovered)
	}
}

// A stream whose creation fails has its error judged before the
// interceptor returns: the panic goes on to the interceptor's caller.
func TestStreamClientFailurePanicOnCreationReachesTheCaller(t *testing.T) {
	icp, ex, ev := judgePanicking(t, false)
	recovered, _ := recovering(func() {
		icp(context.Background(), &grpc.StreamDesc{ServerStreams: true}, nil, "/t.S/M",
			func(context.Context, *grpc.StreamDesc, *grpc.ClientConn, string, ...grpc.CallOption) (grpc.ClientStream, error) {
				return nil, status.Error(codes.Unavailable, "no stream")
			})
	})
	if recovered != "judge broke" {
		t.Errorf("the interceptor's caller recovered %v, want the WithFailure function's panic", recovered)
	}
	if n := slots(ex, "a"); n != 0 {
		t.Errorf("%d slots held after the creation failed", n)
	}
	if e := completed(t, ev); e.Status != executor.Failed {
		t.Errorf("completed %v (%v), want Failed", e.Status, e.Err)
	}
}

// sendPanicking is a stream whose SendMsg panics, as a codec below the
// interceptor might; its other methods succeed.
type sendPanicking struct{ grpc.ClientStream }

func (sendPanicking) SendMsg(any) error { panic("send broke") }
func (sendPanicking) RecvMsg(any) error { return nil }
func (sendPanicking) CloseSend() error  { return nil }

// A method of the stream below that panics ends the stream with its own
// panic, whatever WithFailure's function does as it judges that end: the
// stream's caller recovers the method's panic, and its next calls return.
func TestStreamClientMethodPanicWinsOverFailurePanic(t *testing.T) {
	icp, _, ev := judgePanicking(t, false)
	cs, err := icp(context.Background(), &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, nil, "/t.S/M",
		func(context.Context, *grpc.StreamDesc, *grpc.ClientConn, string, ...grpc.CallOption) (grpc.ClientStream, error) {
			return sendPanicking{}, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	if recovered, _ := recovering(func() { cs.SendMsg(nil) }); recovered != "send broke" {
		t.Errorf("SendMsg's caller recovered %v, want the stream's own panic", recovered)
	}
	if e := completed(t, ev); e.Status != executor.Failed {
		t.Errorf("completed %v (%v), want Failed", e.Status, e.Err)
	}
	for name, call := range map[string]func(){"CloseSend": func() { cs.CloseSend() }, "RecvMsg": func() { cs.RecvMsg(nil) }} {
		if recovered, returned := recovering(call); !returned {
			t.Errorf("%s after the stream's panic: recovered %v, want it to return", name, recovered)
		}
	}
}
