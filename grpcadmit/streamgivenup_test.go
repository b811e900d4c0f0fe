package grpcadmit_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/groupexec/groupexec/breaker"
	"github.com/groupexec/groupexec/clock"
	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/grpcadmit"
)

// quietStream is a server stream whose sends succeed and go nowhere.
type quietStream struct{ serverStream }

func (*quietStream) SendMsg(any) error            { return nil }
func (*quietStream) SendHeader(metadata.MD) error { return nil }

// A stream handler that sent nothing and returns nil once its stream's
// context has ended (its caller cancelled it, its deadline passed), as a
// subscription's loop does on ctx.Done, gave the stream up: its OK goes to
// no one. It counts as Cancelled, as httpadmit counts a next that wrote
// nothing and returned once its request was cancelled. Counted as a
// Success, it closed the half-open breaker whose probe it was, though it
// did no work: any caller could close its tenant's breaker by opening a
// stream and cancelling it. A handler that sent a message before its
// caller went away, or that returns while its stream is alive, still
// counts as a Success.
func TestStreamGivenUpHavingSentNothingIsCancelled(t *testing.T) {
	for _, tc := range []struct {
		name   string
		sends  bool // the handler sends a message before its caller goes away
		cancel bool // the caller goes away
		want   executor.Status
		open   breaker.State // the probe's breaker once it is counted
	}{
		{"given up", false, true, executor.Cancelled, breaker.StateHalfOpen},
		{"sent, then given up", true, true, executor.Success, breaker.StateClosed},
		{"nothing to send", false, false, executor.Success, breaker.StateClosed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clock.NewFake(time.Unix(1_000_000, 0))
			ev := newEvents()
			ex := newExec(t, nil, ev.listener(), executor.WithGroupBreaker(breaker.Settings{
				Clock: clk, Timeout: time.Minute, ReadyToTrip: func(c breaker.Counts) bool { return c.ConsecutiveFailures >= 1 },
			}))
			icp := grpcadmit.StreamServerInterceptor(ex)
			info := &grpc.StreamServerInfo{FullMethod: "/test.Gate/Watch"}
			md := metadata.Pairs("x-tenant", "acme")

			// A failure opens the breaker; a minute on, the next stream is its probe.
			_ = icp(nil, &quietStream{serverStream{ctx: metadata.NewIncomingContext(context.Background(), md)}}, info,
				func(any, grpc.ServerStream) error { return context.DeadlineExceeded })
			<-ev.completed
			if s, _ := ex.GroupStats("acme"); s.Breaker != breaker.StateOpen {
				t.Fatalf("breaker %v after a failure, want open", s.Breaker)
			}
			clk.Advance(time.Minute)

			ctx, cancel := context.WithCancel(metadata.NewIncomingContext(context.Background(), md))
			defer cancel()
			err := icp(nil, &quietStream{serverStream{ctx: ctx}}, info, func(_ any, ss grpc.ServerStream) error {
				if tc.sends {
					if err := ss.SendMsg(wrapperspb.String("x")); err != nil {
						return err
					}
				}
				if tc.cancel {
					cancel() // the caller goes away
					<-ss.Context().Done()
				}
				return nil
			})
			if err != nil {
				t.Fatalf("the interceptor returned %v, want the handler's nil", err)
			}
			if e := <-ev.completed; e.Status != tc.want {
				t.Errorf("the probe ended %v (%v), want %v", e.Status, e.Err, tc.want)
			}
			if s, _ := ex.GroupStats("acme"); s.Breaker != tc.open {
				t.Errorf("breaker %v after the probe, want %v", s.Breaker, tc.open)
			}
		})
	}
}

// quietTrailerStream is a quietStream that keeps the trailer set on it.
type quietTrailerStream struct {
	quietStream
	trailer metadata.MD
}

func (s *quietTrailerStream) SetTrailer(md metadata.MD) { s.trailer = metadata.Join(s.trailer, md) }

// A stream the executor stops (Close, ShutdownGroup's deadline) whose
// handler sent nothing and returns nil, as a subscription's loop does on
// ctx.Done, while its caller is still there, reaches the caller as
// codes.Unavailable with RetryInfo and a pushback, as a handler's answer
// of the cancellation does: sent as it was, OK told the caller that the
// stream had ended with nothing to send (an empty listing, a subscription
// with no events), so that it neither retried nor went to another server.
// A stream that sent something, or whose caller went away, keeps its nil.
func TestStreamGivenUpAfterTheExecutorStopIsUnavailable(t *testing.T) {
	for _, tc := range []struct {
		name  string
		sends bool
		want  codes.Code
	}{
		{"sent nothing", false, codes.Unavailable},
		{"sent a message", true, codes.OK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev := newEvents()
			ex := newExec(t, nil, ev.listener())
			ss := &quietTrailerStream{quietStream: quietStream{serverStream{ctx: metadata.NewIncomingContext(context.Background(), metadata.Pairs("x-tenant", "a"))}}}
			entered := make(chan struct{})
			done := make(chan error, 1)
			go func() {
				done <- grpcadmit.StreamServerInterceptor(ex)(nil, ss, &grpc.StreamServerInfo{FullMethod: "/test.Gate/Watch"},
					func(_ any, ss grpc.ServerStream) error {
						if tc.sends {
							if err := ss.SendMsg(wrapperspb.String("x")); err != nil {
								return err
							}
						}
						close(entered)
						<-ss.Context().Done()
						return nil
					})
			}()
			<-entered
			ex.Close()
			err := <-done
			if status.Code(err) != tc.want {
				t.Fatalf("the stream the executor stopped: %v, want %v", err, tc.want)
			}
			if tc.want == codes.Unavailable {
				if retryDelay(err) != grpcadmit.DefaultRetryAfter {
					t.Errorf("RetryInfo %v, want %v", retryDelay(err), grpcadmit.DefaultRetryAfter)
				}
				if v := ss.trailer.Get("grpc-retry-pushback-ms"); len(v) != 1 || v[0] != "1000" {
					t.Errorf("pushback %q, want 1000", v)
				}
				if !errors.Is(err, context.Canceled) {
					t.Errorf("%v does not match context.Canceled: an interceptor chained before would count it by its code", err)
				}
			}
			if e := <-ev.completed; e.Status == executor.Failed {
				t.Errorf("the stream counted %v (%v), want no failure", e.Status, e.Err)
			}
		})
	}
}
