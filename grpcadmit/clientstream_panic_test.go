package grpcadmit_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/grpcadmit"
	"github.com/groupexec/groupexec/policy"
)

// brokenStream is a stream whose methods panic, or exit their goroutine,
// as a stream wrapper or codec below the interceptor might.
type brokenStream struct {
	grpc.ClientStream
	exit bool
}

func (s brokenStream) fail() {
	if s.exit {
		runtime.Goexit()
	}
	panic("stream broke")
}

func (s brokenStream) RecvMsg(any) error            { s.fail(); return nil }
func (s brokenStream) SendMsg(any) error            { s.fail(); return nil }
func (s brokenStream) Header() (metadata.MD, error) { s.fail(); return nil, nil }
func (s brokenStream) CloseSend() error             { s.fail(); return nil }

// A method of an admitted stream that panics, or exits its goroutine,
// frees the stream's slot as the panic goes on to the caller, ends the
// stream's context, and the stream counts as failed. The caller's context
// stays alive: the slot was held for as long as it was.
func TestStreamClientMethodPanicFreesTheSlot(t *testing.T) {
	methods := map[string]func(grpc.ClientStream){
		"RecvMsg":   func(cs grpc.ClientStream) { cs.RecvMsg(nil) },
		"SendMsg":   func(cs grpc.ClientStream) { cs.SendMsg(nil) },
		"Header":    func(cs grpc.ClientStream) { cs.Header() },
		"CloseSend": func(cs grpc.ClientStream) { cs.CloseSend() },
	}
	for name, call := range methods {
		for _, exit := range []bool{false, true} {
			t.Run(name+map[bool]string{false: "/panic", true: "/goexit"}[exit], func(t *testing.T) {
				ev := newEvents()
				ex := newExec(t, []policy.Option{policy.WithDefaultMaxInFlight(1)}, ev.listener())
				icp := grpcadmit.StreamClientInterceptor(ex, grpcadmit.WithTenantFunc(func(context.Context) (string, error) { return "a", nil }))
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel() // the caller's context stays alive throughout
				var streamCtx context.Context
				cs, err := icp(ctx, &grpc.StreamDesc{ServerStreams: true}, nil, "/t.S/M", func(sctx context.Context, _ *grpc.StreamDesc, _ *grpc.ClientConn, _ string, _ ...grpc.CallOption) (grpc.ClientStream, error) {
					streamCtx = sctx
					sctx.Done() // as gRPC watches it
					return brokenStream{exit: exit}, nil
				})
				if err != nil {
					t.Fatal(err)
				}
				if n := slots(ex, "a"); n != 1 {
					t.Fatalf("%d slots held by the open stream, want 1", n)
				}
				var recovered any
				done := make(chan struct{})
				go func() {
					defer close(done)
					defer func() { recovered = recover() }()
					call(cs)
				}()
				<-done
				if want := map[bool]any{false: "stream broke", true: nil}[exit]; recovered != want {
					t.Errorf("the caller recovered %v, want %v", recovered, want)
				}
				if n := slots(ex, "a"); n != 0 {
					t.Fatalf("%d slots held after %s did not return", n, name)
				}
				if e := completed(t, ev); e.Status != executor.Failed {
					t.Errorf("completed %v (%v), want Failed", e.Status, e.Err)
				}
				select {
				case <-streamCtx.Done(): // the stream ends too
				case <-time.After(10 * time.Second):
					t.Error("the stream's context still alive 10s after its slot was freed")
				}
			})
		}
	}
}
