package grpcadmit_test

import (
	"context"
	"errors"
	"sync/atomic"
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
	"github.com/groupexec/groupexec/internal/adaptertest"
	"github.com/groupexec/groupexec/policy"
)

// refused is what a caller saw of one refused call.
type refused struct {
	code     codes.Code
	message  string
	retry    time.Duration // the RetryInfo delay, -1 for none
	pushback []string      // the grpc-retry-pushback-ms trailer
}

func refusedOf(err error, trailer metadata.MD) refused {
	return refused{status.Code(err), status.Convert(err).Message(), retryDelay(err), trailer.Get("grpc-retry-pushback-ms")}
}

// A call that waited in its group's queue when the group's breaker opened is
// refused as it would start, and its caller sees what a call refused by the
// open breaker at its admission sees: Unavailable, the breaker's time left
// as RetryInfo and, from a server, as the pushback trailer; the handler, or
// the dependency, never sees it. So for each interceptor, unary and stream,
// server and client.
func TestQueuedCallRefusedByTheBreakerAsAtAdmission(t *testing.T) {
	for _, side := range []struct {
		name   string
		server bool // the interceptor is the server's; else the client's
		stream bool // the call is a stream (First); else unary (Call)
	}{
		{"unary server", true, false},
		{"stream server", true, true},
		{"unary client", false, false},
		{"stream client", false, true},
	} {
		t.Run(side.name, func(t *testing.T) {
			clk := clock.NewFake(time.Unix(1_000_000, 0))
			ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(1)}, executor.WithGroupBreaker(breaker.Settings{
				Clock: clk, Timeout: time.Hour, ReadyToTrip: func(c breaker.Counts) bool { return c.ConsecutiveFailures >= 1 },
			}))
			entered, release := make(chan struct{}), make(chan struct{})
			var others atomic.Int32 // calls other than the failing one that reached the handler
			g := newGate()
			g.release() // Call answers as soon as reply returns nil
			g.reply = func(ctx context.Context, in string) error {
				if in != "fail" {
					others.Add(1)
					return nil
				}
				close(entered)
				select {
				case <-release:
				case <-ctx.Done():
				}
				return status.Error(codes.Internal, "the dependency failed")
			}
			var sopts []grpc.ServerOption
			var dopts []grpc.DialOption
			switch {
			case side.server && side.stream:
				sopts = append(sopts, grpc.ChainStreamInterceptor(grpcadmit.StreamServerInterceptor(ex)))
			case side.server:
				sopts = append(sopts, unary(ex))
			case side.stream:
				dopts = append(dopts, grpc.WithChainStreamInterceptor(grpcadmit.StreamClientInterceptor(ex)))
			default:
				dopts = append(dopts, grpc.WithChainUnaryInterceptor(grpcadmit.UnaryClientInterceptor(ex)))
			}
			cc := dial(t, start(t, g, sopts...), dopts...)
			group := "bad"
			if !side.server {
				group = cc.Target()
			}
			invoke := func(value string) (metadata.MD, error) {
				ctx := metadata.AppendToOutgoingContext(t.Context(), "x-tenant", "bad")
				var trailer metadata.MD
				if !side.stream {
					err := cc.Invoke(ctx, "/test.Gate/Call", wrapperspb.String(value), new(wrapperspb.StringValue), grpc.Trailer(&trailer))
					return trailer, err
				}
				cs, err := cc.NewStream(ctx, &gateDesc.Streams[2], "/test.Gate/First")
				if err != nil {
					return nil, err // refused by the client interceptor: never sent
				}
				if err := cs.SendMsg(wrapperspb.String(value)); err == nil {
					_ = cs.CloseSend()
				}
				for err == nil { // until the stream's status: io.EOF for one that succeeded
					err = cs.RecvMsg(new(wrapperspb.StringValue))
				}
				return cs.Trailer(), err
			}

			first := make(chan error, 1)
			go func() { _, err := invoke("fail"); first <- err }()
			<-entered
			type outcome struct {
				err     error
				trailer metadata.MD
			}
			queued := make(chan outcome, 1)
			go func() { md, err := invoke("queued"); queued <- outcome{err, md} }()
			adaptertest.Eventually(t, "the second call queued", func() bool { s, _ := ex.GroupStats(group); return s.Waiting == 1 })

			close(release)
			if err := <-first; status.Code(err) != codes.Internal {
				t.Fatalf("first call: %v, want the handler's Internal", err)
			}
			var late outcome
			select {
			case late = <-queued:
			case <-time.After(10 * time.Second):
				t.Fatal("the queued call did not end within 10s")
			}
			trailer, err := invoke("admitted")
			atAdmission := refusedOf(err, trailer)
			want := refused{code: codes.Unavailable, retry: time.Hour, message: atAdmission.message}
			if side.server {
				want.pushback = []string{"3600000"}
			}
			if atAdmission.code != want.code || atAdmission.retry != want.retry || len(atAdmission.pushback) != len(want.pushback) ||
				len(want.pushback) == 1 && atAdmission.pushback[0] != want.pushback[0] {
				t.Fatalf("refused at admission: %+v, want %+v (the breaker's hour left)", atAdmission, want)
			}
			if got := refusedOf(late.err, late.trailer); got.code != atAdmission.code || got.message != atAdmission.message ||
				got.retry != atAdmission.retry || len(got.pushback) != len(atAdmission.pushback) ||
				len(got.pushback) == 1 && got.pushback[0] != atAdmission.pushback[0] {
				t.Errorf("queued then refused by the breaker: %+v; refused at admission: %+v, want the same", got, atAdmission)
			}
			if !side.server {
				// The client interceptor's own error: the executor's refusal.
				for _, e := range []error{late.err, err} {
					var re *executor.RejectedError
					if !errors.As(e, &re) || re.Limit != executor.LimitBreaker || !errors.Is(e, breaker.ErrOpenState) {
						t.Errorf("client refusal %v, want a refusal by the open breaker", e)
					}
				}
			}
			if n := others.Load(); n != 0 {
				t.Errorf("%d refused calls reached the handler", n)
			}
			if s, _ := ex.GroupStats(group); s.Rejected != 2 || s.Failed != 1 || s.Waiting != 0 || s.InFlight != 0 {
				t.Errorf("group: %+v, want 1 failed, 2 rejected, none waiting or in flight", s)
			}
		})
	}
}
