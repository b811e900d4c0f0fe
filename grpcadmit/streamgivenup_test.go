package grpcadmit_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
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
