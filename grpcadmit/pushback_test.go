package grpcadmit_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/groupexec/groupexec/grpcadmit"
	"github.com/groupexec/groupexec/policy"
)

// retryPolicy is a client service config that retries Call on
// ResourceExhausted and InvalidArgument, up to 3 attempts, after backoff
// (a duration in seconds, as the service config writes it) when the
// server sends no pushback.
func retryPolicy(backoff string) grpc.DialOption {
	return grpc.WithDefaultServiceConfig(`{"methodConfig": [{
		"name": [{"service": "test.Gate"}],
		"retryPolicy": {
			"maxAttempts": 3,
			"initialBackoff": "` + backoff + `",
			"maxBackoff": "` + backoff + `",
			"backoffMultiplier": 1,
			"retryableStatusCodes": ["RESOURCE_EXHAUSTED", "INVALID_ARGUMENT"]
		}
	}]}`)
}

// attempts is a server interceptor, chained before grpcadmit's, that counts
// the attempts of each call by its request value, and runs hook (if set)
// around the inner interceptors.
type attempts struct {
	mu   sync.Mutex
	n    map[string]int
	hook func(value string, attempt int, next func() error) error
}

func (a *attempts) interceptor(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	v := req.(*wrapperspb.StringValue).Value
	a.mu.Lock()
	if a.n == nil {
		a.n = make(map[string]int)
	}
	a.n[v]++
	n := a.n[v]
	a.mu.Unlock()
	var resp any
	next := func() (err error) { resp, err = handler(ctx, req); return err }
	var err error
	if a.hook == nil {
		err = next()
	} else {
		err = a.hook(v, n, next)
	}
	return resp, err // read once next has set it
}

func (a *attempts) of(v string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.n[v]
}

// A refusal that a later try may pass carries the grpc-retry-pushback-ms
// trailer, which grpc-go's retry policy reads (it does not read RetryInfo):
// the call is retried after the pushback, not after the policy's backoff of
// 1000s, and the retry is served.
func TestRefusalPushbackRetriesAfterTheDelay(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxInFlight(1)})
	g := newGate()
	firstDone := make(chan struct{})
	at := &attempts{}
	at.hook = func(v string, n int, next func() error) error {
		err := next()
		switch {
		case v == "1":
			close(firstDone) // its slot is free: Do has returned
		case v == "2" && n == 1:
			if status.Code(err) != codes.ResourceExhausted {
				t.Errorf("first attempt: %v, want ResourceExhausted", err)
			}
			// Free the slot before the refusal reaches the client, so
			// that its retry is admitted.
			g.release()
			<-firstDone
		}
		return err
	}
	addr := start(t, g, grpc.ChainUnaryInterceptor(at.interceptor,
		grpcadmit.UnaryServerInterceptor(ex, grpcadmit.WithRetryAfter(time.Millisecond))))
	cc := dial(t, addr, retryPolicy("1000s"))
	done := make(chan error)
	go func() { _, err := call(context.Background(), cc, "a", "1"); done <- err }()
	<-g.entered
	// Bounded well past the pushback and well short of the backoff.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := call(ctx, cc, "a", "2")
	if err != nil || out != "ok 2" {
		t.Errorf("refused call: %q %v; want it retried after the pushback and served", out, err)
	}
	if n := at.of("2"); n != 2 {
		t.Errorf("%d attempts, want 2", n)
	}
	if err := <-done; err != nil {
		t.Error(err)
	}
}

// A refusal that a retry would meet again (a weight above a limit, an
// invalid tenant) carries a negative pushback, which stops grpc-go's
// retries even where the policy lists its code.
func TestPointlessRefusalIsNotRetried(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxInFlight(1)})
	at := &attempts{}
	g := newGate()
	g.release()
	heavy := grpcadmit.WithWeightFunc(func(ctx context.Context, _ string) (int, error) {
		if md, _ := metadata.FromIncomingContext(ctx); len(md.Get("heavy")) > 0 {
			return 2, nil
		}
		return 1, nil
	})
	cc := dial(t, start(t, g, grpc.ChainUnaryInterceptor(at.interceptor, grpcadmit.UnaryServerInterceptor(ex, heavy))),
		retryPolicy("0.001s"))
	for _, c := range []struct {
		value, tenant string
		md            []string
		code          codes.Code
	}{
		{"heavy", "a", []string{"heavy", "1"}, codes.ResourceExhausted},
		{"invalid", "a b", nil, codes.InvalidArgument},
	} {
		ctx := metadata.AppendToOutgoingContext(context.Background(), c.md...)
		var trailer metadata.MD
		out := new(wrapperspb.StringValue)
		err := cc.Invoke(metadata.AppendToOutgoingContext(ctx, "x-tenant", c.tenant), "/test.Gate/Call",
			wrapperspb.String(c.value), out, grpc.Trailer(&trailer))
		if status.Code(err) != c.code {
			t.Errorf("%s: %v, want %v", c.value, err, c.code)
		}
		if n := at.of(c.value); n != 1 {
			t.Errorf("%s: %d attempts, want 1", c.value, n)
		}
		if v := trailer.Get("grpc-retry-pushback-ms"); len(v) != 1 || v[0] != "-1" {
			t.Errorf("%s: pushback %q, want -1", c.value, v)
		}
	}
}

// The pushback is RetryInfo's delay in whole milliseconds, rounded up, on a
// stream's refusal too.
func TestPushbackValues(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxInFlight(1)})
	g := newGate()
	cc := dial(t, start(t, g,
		unary(ex, grpcadmit.WithRetryAfter(1500*time.Microsecond)),
		grpc.ChainStreamInterceptor(grpcadmit.StreamServerInterceptor(ex, grpcadmit.WithRetryAfter(2*time.Second)))))
	done := make(chan struct{})
	go func() { defer close(done); call(context.Background(), cc, "a", "1") }()
	<-g.entered

	var trailer metadata.MD
	out := new(wrapperspb.StringValue)
	err := cc.Invoke(metadata.AppendToOutgoingContext(context.Background(), "x-tenant", "a"), "/test.Gate/Call",
		wrapperspb.String("2"), out, grpc.Trailer(&trailer))
	if v := trailer.Get("grpc-retry-pushback-ms"); status.Code(err) != codes.ResourceExhausted || len(v) != 1 || v[0] != "2" {
		t.Errorf("unary refusal: %v, pushback %q; want ResourceExhausted and 2", err, v)
	}

	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-tenant", "a")
	s, err := cc.NewStream(ctx, &gateDesc.Streams[1], "/test.Gate/Wait")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CloseSend(); err != nil {
		t.Fatal(err)
	}
	err = s.RecvMsg(new(wrapperspb.StringValue))
	if v := s.Trailer().Get("grpc-retry-pushback-ms"); status.Code(err) != codes.ResourceExhausted || len(v) != 1 || v[0] != "2000" {
		t.Errorf("stream refusal: %v, pushback %q; want ResourceExhausted and 2000", err, v)
	}

	g.release()
	<-done
}
