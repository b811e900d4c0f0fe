package grpcadmit_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/grpcadmit"
	"github.com/groupexec/groupexec/httpadmit"
	"github.com/groupexec/groupexec/policy"
)

// byMethod weighs a call by its method: Heavy 2, anything else 1.
var byMethod = grpcadmit.WithWeightFunc(func(_ context.Context, method string) (int, error) {
	if method == "/test.Gate/Heavy" {
		return 2, nil
	}
	return 1, nil
})

// A unary call takes its weight at the group's limits: under a concurrency
// of 4, two heavy calls run in the handler at once and the next ones wait,
// counted inside the handler. (synctest.Wait returns once every call is
// either in the handler or waiting in its queue.)
func TestUnaryWeights(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(4)})
		icp := grpcadmit.UnaryServerInterceptor(ex, byMethod)
		hold := make(chan struct{})
		var permits, most, inside atomic.Int64
		handler := func(_ context.Context, req any) (any, error) {
			w := int64(req.(int))
			p := permits.Add(w)
			for m := most.Load(); p > m && !most.CompareAndSwap(m, p); m = most.Load() {
			}
			inside.Add(1)
			<-hold
			inside.Add(-1)
			permits.Add(-w)
			return "ok", nil
		}
		var wg sync.WaitGroup
		for _, method := range []string{"Heavy", "Heavy", "Heavy", "Light"} {
			weight := map[string]int{"Heavy": 2, "Light": 1}[method]
			wg.Go(func() {
				info := &grpc.UnaryServerInfo{FullMethod: "/test.Gate/" + method}
				if _, err := icp(context.Background(), weight, info, handler); err != nil {
					t.Errorf("%s: %v", method, err)
				}
			})
			synctest.Wait()
		}
		s, _ := ex.GroupStats(grpcadmit.DefaultGroup)
		if n, p := inside.Load(), permits.Load(); n != 2 || p != 4 || s.Running != 4 || s.Waiting != 2 {
			t.Errorf("%d calls of %d permits in the handler; stats %d permits running, %d waiting; want 2, 4, 4, 2",
				n, p, s.Running, s.Waiting)
		}
		close(hold)
		wg.Wait()
		if m := most.Load(); m != 4 {
			t.Errorf("at most %d permits in the handler at once, want 4", m)
		}
		if s, _ := ex.GroupStats(grpcadmit.DefaultGroup); s.ServedPermits != 7 {
			t.Errorf("served %d permits, want 7", s.ServedPermits)
		}
	})
}

// The weight rule, over the wire: 0 means 1; an error or a negative weight
// is InvalidArgument and never reaches the executor; a weight above a limit
// is ResourceExhausted without RetryInfo.
func TestUnaryInvalidWeights(t *testing.T) {
	ev := newEvents()
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(3)}, ev.listener())
	g := newGate()
	g.release()
	fromMetadata := grpcadmit.WithWeightFunc(func(ctx context.Context, _ string) (int, error) {
		vs := metadata.ValueFromIncomingContext(ctx, "x-weight")
		if len(vs) != 1 {
			return 0, errors.New("no x-weight")
		}
		return strconv.Atoi(vs[0])
	})
	cc := dial(t, start(t, g, unary(ex, fromMetadata)))
	for _, tc := range []struct {
		w      string
		code   codes.Code
		weight int // the weight it ran with
	}{
		{"0", codes.OK, 1},
		{"3", codes.OK, 3},
		{"-1", codes.InvalidArgument, 0},
		{"x", codes.InvalidArgument, 0},
		{"4", codes.ResourceExhausted, 0},
	} {
		_, err := call(metadata.AppendToOutgoingContext(context.Background(), "x-weight", tc.w), cc, "", "v")
		if status.Code(err) != tc.code || retryDelay(err) != -1 {
			t.Errorf("w=%s: %v (retry %v), want %v without RetryInfo", tc.w, err, retryDelay(err), tc.code)
		}
		if tc.code == codes.OK {
			if e := <-ev.started; e.Weight != tc.weight {
				t.Errorf("w=%s: ran with weight %d, want %d", tc.w, e.Weight, tc.weight)
			}
		}
	}
	if s := ex.Stats(); s.Submitted != 3 || s.Rejected != 1 || g.served.Load() != 2 {
		t.Errorf("%d submitted, %d rejected, %d served; want 3, 1 (the heavy one), 2", s.Submitted, s.Rejected, g.served.Load())
	}
	// In the server, the refusal matches the error that caused it.
	icp := grpcadmit.UnaryServerInterceptor(ex, grpcadmit.WithWeightFunc(func(context.Context, string) (int, error) { return -1, nil }))
	if _, err := icp(context.Background(), nil, nil, nil); !errors.Is(err, httpadmit.ErrInvalidWeight) {
		t.Errorf("negative weight: %v, want ErrInvalidWeight", err)
	}
	icp = grpcadmit.UnaryServerInterceptor(ex, grpcadmit.WithWeightFunc(func(context.Context, string) (int, error) { return 4, nil }))
	if _, err := icp(context.Background(), nil, nil, nil); !errors.Is(err, executor.ErrTooHeavy) {
		t.Errorf("weight 4: %v, want ErrTooHeavy", err)
	}
}

// A stream holds its weight for its life.
func TestStreamWeight(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(2)})
	icp := grpcadmit.StreamServerInterceptor(ex, byMethod)
	var running int
	err := icp(nil, fakeStream{context.Background()}, &grpc.StreamServerInfo{FullMethod: "/test.Gate/Heavy"},
		func(any, grpc.ServerStream) error {
			s, _ := ex.GroupStats(grpcadmit.DefaultGroup)
			running = s.Running
			return nil
		})
	if err != nil || running != 2 {
		t.Errorf("%v; %d permits running in the handler, want 2", err, running)
	}
}

type fakeStream struct{ ctx context.Context }

func (s fakeStream) Context() context.Context   { return s.ctx }
func (fakeStream) SetHeader(metadata.MD) error  { return nil }
func (fakeStream) SendHeader(metadata.MD) error { return nil }
func (fakeStream) SetTrailer(metadata.MD)       {}
func (fakeStream) SendMsg(any) error            { return nil }
func (fakeStream) RecvMsg(any) error            { return nil }

// The client interceptor: a call holds its weight in its target's group
// until its reply is in; an invalid weight is never sent.
func TestClientWeights(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(3), policy.WithDefaultMaxInFlight(3)})
	g := newGate()
	type bad struct{}
	weight := grpcadmit.WithWeightFunc(func(ctx context.Context, method string) (int, error) {
		if ctx.Value(bad{}) != nil {
			return 0, errors.New("no weight")
		}
		if method != "/test.Gate/Call" {
			t.Errorf("method %q", method)
		}
		return 2, nil
	})
	cc := dial(t, start(t, g), grpc.WithChainUnaryInterceptor(grpcadmit.UnaryClientInterceptor(ex, weight)))
	first := make(chan error, 1)
	go func() { _, err := call(context.Background(), cc, "", "1"); first <- err }()
	select {
	case <-g.entered:
	case err := <-first:
		t.Fatalf("first call: %v", err)
	}
	if s, _ := ex.GroupStats(cc.Target()); s.InFlight != 2 {
		t.Errorf("%d permits in flight, want 2", s.InFlight)
	}
	if _, err := call(context.Background(), cc, "", "2"); status.Code(err) != codes.ResourceExhausted || !errors.Is(err, executor.ErrRejected) {
		t.Errorf("a second call of weight 2 with 1 permit left: %v", err)
	}
	_, err := call(context.WithValue(context.Background(), bad{}, true), cc, "", "3")
	if status.Code(err) != codes.InvalidArgument || !errors.Is(err, httpadmit.ErrInvalidWeight) {
		t.Errorf("invalid weight: %v", err)
	}
	g.release()
	if err := <-first; err != nil {
		t.Error(err)
	}
	if g.served.Load() != 1 {
		t.Errorf("served %d, want 1", g.served.Load())
	}
}
