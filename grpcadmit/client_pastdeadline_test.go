package grpcadmit_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/groupexec/groupexec/breaker"
	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/grpcadmit"
)

// A call admitted once its deadline has passed by the clock, though its
// context's timer has not fired yet (timers fire late on a loaded client),
// is not sent either: gRPC would fail it at once, unsent, with
// DeadlineExceeded, a failure of the dependency by ClientFailure, that
// never saw it. It is refused with a *RefusalError, as one admitted once
// its context ended.
func TestClientPastDeadlineAtAdmissionIsNotSent(t *testing.T) {
	for _, kind := range []string{"unary", "stream"} {
		t.Run(kind, func(t *testing.T) {
			ex := newExec(t, nil, executor.WithGroupBreaker(breaker.Settings{
				Timeout: time.Hour, ReadyToTrip: func(c breaker.Counts) bool { return c.ConsecutiveFailures >= 1 },
			}))
			g := newGate()
			g.release()
			cc := dial(t, start(t, g), grpc.WithChainUnaryInterceptor(grpcadmit.UnaryClientInterceptor(ex)),
				grpc.WithChainStreamInterceptor(grpcadmit.StreamClientInterceptor(ex)))
			ctx := pastDeadline{context.Background()} // its timer has not fired: Err is nil
			var err error
			if kind == "unary" {
				_, err = call(ctx, cc, "", "x")
			} else {
				_, err = cc.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, "/test.Gate/Echo")
			}
			var re *grpcadmit.RefusalError
			if status.Code(err) != codes.DeadlineExceeded || !errors.As(err, &re) || grpcadmit.ClientFailure(err) {
				t.Errorf("%v (ClientFailure %v), want a *RefusalError with DeadlineExceeded and no failure", err, grpcadmit.ClientFailure(err))
			}
			if s, _ := ex.GroupStats(cc.Target()); s.Failed != 0 || s.Breaker != breaker.StateClosed {
				t.Errorf("%d failed, breaker %v; want 0 and closed", s.Failed, s.Breaker)
			}
			if n := len(g.entered); n != 0 {
				t.Errorf("the server saw %d calls, want 0", n)
			}
		})
	}
}
