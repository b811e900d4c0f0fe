package grpcadmit_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/groupexec/groupexec/breaker"
	"github.com/groupexec/groupexec/clock"
	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/grpcadmit"
	"github.com/groupexec/groupexec/httpadmit"
	"github.com/groupexec/groupexec/internal/adaptertest"
	"github.com/groupexec/groupexec/policy"
)

func unary(ex *executor.Executor, opts ...grpcadmit.Option) grpc.ServerOption {
	return grpc.ChainUnaryInterceptor(grpcadmit.UnaryServerInterceptor(ex, opts...))
}

// retryDelay returns the RetryInfo delay of err's status, or -1.
func retryDelay(err error) time.Duration {
	for _, d := range status.Convert(err).Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			return ri.RetryDelay.AsDuration()
		}
	}
	return -1
}

// A tenant's calls run at most its concurrency limit at once; another tenant
// is served meanwhile.
func TestUnaryHoldsTheGroupLimit(t *testing.T) {
	ev := newEvents()
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(2)}, ev.listener())
	g := newGate()
	cc := dial(t, start(t, g, unary(ex)))
	const n = 6
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			if _, err := call(context.Background(), cc, "hot", "h"); err != nil {
				t.Errorf("call %d: %v", i, err)
			}
		})
	}
	for range n {
		<-ev.submitted
	}
	<-g.entered
	<-g.entered
	adaptertest.Eventually(t, "the others waiting", func() bool { s, _ := ex.GroupStats("hot"); return s.Waiting == n-2 })
	if s, _ := ex.GroupStats("hot"); s.RunningTasks != 2 || s.Waiting != n-2 {
		t.Fatalf("hot: %d running, %d waiting", s.RunningTasks, s.Waiting)
	}
	wg.Go(func() {
		if out, err := call(context.Background(), cc, "cold", "c"); err != nil || out != "ok c" {
			t.Errorf("cold: %q %v", out, err)
		}
	})
	if v := <-g.entered; v != "c" {
		t.Fatalf("entered %q, want the cold call", v)
	}
	g.release()
	wg.Wait()
	if m := g.max.Load(); m != 3 {
		t.Errorf("%d calls ran at once, want 3", m)
	}
	if s := g.served.Load(); s != n+1 {
		t.Errorf("served %d", s)
	}
}

// A refusal is ResourceExhausted with RetryInfo; the handler never sees it.
func TestUnaryRefusal(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxInFlight(1)})
	g := newGate()
	cc := dial(t, start(t, g, unary(ex, grpcadmit.WithRetryAfter(3*time.Second))))
	done := make(chan struct{})
	go func() { defer close(done); call(context.Background(), cc, "a", "1") }()
	<-g.entered
	_, err := call(context.Background(), cc, "a", "2")
	if status.Code(err) != codes.ResourceExhausted || retryDelay(err) != 3*time.Second {
		t.Errorf("got %v (retry %v), want ResourceExhausted with RetryInfo 3s", err, retryDelay(err))
	}
	if !strings.Contains(status.Convert(err).Message(), "group in-flight") {
		t.Errorf("message %q does not name the limit", status.Convert(err).Message())
	}
	g.release()
	<-done
	if s := g.served.Load(); s != 1 {
		t.Errorf("served %d, want 1", s)
	}
}

// Shutdown and an open breaker are Unavailable, with RetryInfo: for the
// breaker, the time it has left before it lets a probe through, longer
// than WithRetryAfter's second, so that the caller does not retry into it.
func TestUnaryUnavailable(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_000_000, 0))
	ex := newExec(t, nil, executor.WithGroupBreaker(breaker.Settings{
		Clock: clk, Timeout: time.Hour, ReadyToTrip: func(c breaker.Counts) bool { return c.ConsecutiveFailures >= 1 },
	}))
	g := newGate()
	g.reply = func(_ context.Context, in string) error {
		if in == "fail" {
			return status.Error(codes.Internal, "broken")
		}
		return nil
	}
	g.release()
	cc := dial(t, start(t, g, unary(ex)))
	if _, err := call(context.Background(), cc, "bad", "fail"); status.Code(err) != codes.Internal {
		t.Fatalf("handler's error: %v", err)
	}
	clk.Advance(10 * time.Minute)
	var trailer metadata.MD
	out := new(wrapperspb.StringValue)
	err := cc.Invoke(metadata.AppendToOutgoingContext(context.Background(), "x-tenant", "bad"), "/test.Gate/Call",
		wrapperspb.String("x"), out, grpc.Trailer(&trailer))
	if status.Code(err) != codes.Unavailable || retryDelay(err) != 50*time.Minute || !strings.Contains(err.Error(), "breaker") {
		t.Errorf("open breaker, 50m left: %v (retry %v), want Unavailable, retry in 50m", err, retryDelay(err))
	}
	if v := trailer.Get("grpc-retry-pushback-ms"); len(v) != 1 || v[0] != "3000000" {
		t.Errorf("open breaker, 50m left: pushback %q, want 3000000", v)
	}
	if _, err := call(context.Background(), cc, "good", "x"); err != nil {
		t.Errorf("other tenant: %v", err)
	}
	if err := ex.ShutdownGroup(context.Background(), "good"); err != nil {
		t.Fatal(err)
	}
	if _, err := call(context.Background(), cc, "good", "x"); status.Code(err) != codes.Unavailable || retryDelay(err) != time.Second {
		t.Errorf("group shut down: %v", err)
	}
	ex.Close()
	if _, err := call(context.Background(), cc, "", "x"); status.Code(err) != codes.Unavailable {
		t.Errorf("closed: %v", err)
	}
	if s := g.served.Load(); s != 1 {
		t.Errorf("served %d, want 1", s)
	}
}

// A call refused because a limit resolver gave an invalid value is the
// server's misconfiguration: Internal, without RetryInfo, since a retry
// meets the same limits.
func TestUnaryInvalidLimitIsInternal(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithMaxConcurrencyResolver(func(group string) (int, bool) {
		return 0, group == "bad"
	})})
	g := newGate()
	g.release()
	cc := dial(t, start(t, g, unary(ex)))
	_, err := call(context.Background(), cc, "bad", "x")
	if status.Code(err) != codes.Internal || retryDelay(err) != -1 {
		t.Errorf("got %v (retry %v), want Internal without RetryInfo", err, retryDelay(err))
	}
	if _, err := call(context.Background(), cc, "good", "x"); err != nil {
		t.Errorf("other tenant: %v", err)
	}
}

// Which handler errors count as failures.
func TestUnaryFailures(t *testing.T) {
	ex := newExec(t, nil)
	g := newGate()
	g.release()
	g.reply = func(_ context.Context, in string) error {
		if in == "" {
			return nil
		}
		return status.Error(map[string]codes.Code{"internal": codes.Internal, "invalid": codes.InvalidArgument,
			"notfound": codes.NotFound, "unavailable": codes.Unavailable}[in], in)
	}
	cc := dial(t, start(t, g, unary(ex)))
	for _, in := range []string{"internal", "invalid", "notfound", "unavailable", ""} {
		call(context.Background(), cc, "a", in)
	}
	if s, _ := ex.GroupStats("a"); s.Failed != 2 || s.Succeeded != 3 {
		t.Errorf("%d failed, %d succeeded; want Internal and Unavailable failed", s.Failed, s.Succeeded)
	}
	// WithFailure changes the rule.
	ex2 := newExec(t, nil)
	cc2 := dial(t, start(t, g, unary(ex2, grpcadmit.WithFailure(func(err error) bool { return err != nil }))))
	call(context.Background(), cc2, "a", "notfound")
	if s, _ := ex2.GroupStats("a"); s.Failed != 1 {
		t.Errorf("WithFailure: %d failed", s.Failed)
	}
}

// Invalid tenant metadata is InvalidArgument and reaches nothing.
func TestUnaryInvalidTenant(t *testing.T) {
	ex := newExec(t, nil)
	g := newGate()
	g.release()
	cc := dial(t, start(t, g, unary(ex)))
	for name, md := range map[string]metadata.MD{
		"empty":        metadata.Pairs("x-tenant", ""),
		"twice":        metadata.Pairs("x-tenant", "a", "x-tenant", "b"),
		"too long":     metadata.Pairs("x-tenant", strings.Repeat("a", httpadmit.MaxTenantLen+1)),
		"space inside": metadata.Pairs("x-tenant", "a b"),
	} {
		_, err := call(metadata.NewOutgoingContext(context.Background(), md), cc, "", "x")
		if status.Code(err) != codes.InvalidArgument || retryDelay(err) != -1 {
			t.Errorf("%s: %v", name, err)
		}
	}
	if s := ex.Stats(); s.Submitted != 0 || g.served.Load() != 0 {
		t.Errorf("invalid calls reached the executor or the handler: %+v", s.TaskCounts)
	}
}

// The tenant sources: the default group, another key, a function.
func TestTenantSources(t *testing.T) {
	ev := newEvents()
	ex := newExec(t, nil, ev.listener())
	g := newGate()
	g.release()
	type key struct{}
	cc := dial(t, start(t, g, grpc.ChainUnaryInterceptor(
		grpcadmit.UnaryServerInterceptor(ex, grpcadmit.WithTenantKey("X-Org"), grpcadmit.WithDefaultGroup("anon")))))
	if _, err := call(context.Background(), cc, "ignored", "x"); err != nil {
		t.Fatal(err)
	}
	if e := <-ev.started; e.Group != "anon" {
		t.Errorf("no x-org: group %q", e.Group)
	}
	if _, err := call(metadata.AppendToOutgoingContext(context.Background(), "x-org", " org1 "), cc, "", "x"); err != nil {
		t.Fatal(err)
	}
	if e := <-ev.started; e.Group != "org1" {
		t.Errorf("x-org: group %q", e.Group)
	}
	icp := grpcadmit.UnaryServerInterceptor(ex, grpcadmit.WithTenantFunc(func(ctx context.Context) (string, error) {
		v, _ := ctx.Value(key{}).(string)
		if v == "bad" {
			return "", errors.New("unknown")
		}
		return v, nil
	}))
	ok := func(context.Context, any) (any, error) { return "r", nil }
	if resp, err := icp(context.WithValue(context.Background(), key{}, "f1"), nil, nil, ok); err != nil || resp != "r" {
		t.Fatalf("%v %v", resp, err)
	}
	if e := <-ev.started; e.Group != "f1" {
		t.Errorf("func: group %q", e.Group)
	}
	if _, err := icp(context.WithValue(context.Background(), key{}, "bad"), nil, nil, ok); status.Code(err) != codes.InvalidArgument || !errors.Is(err, httpadmit.ErrInvalidTenant) {
		t.Errorf("func error: %v", err)
	}
}

// A call whose client gives up while it waits never reaches the handler and
// frees its place.
func TestUnaryCancelledWhileQueued(t *testing.T) {
	ev := newEvents()
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(1), policy.WithDefaultMaxInFlight(2)}, ev.listener())
	g := newGate()
	cc := dial(t, start(t, g, unary(ex)))
	first := make(chan error)
	go func() { _, err := call(context.Background(), cc, "a", "1"); first <- err }()
	<-g.entered
	<-ev.submitted
	ctx, cancel := context.WithCancel(context.Background())
	gone := make(chan error)
	go func() { _, err := call(ctx, cc, "a", "2"); gone <- err }()
	<-ev.submitted
	cancel()
	if err := <-gone; status.Code(err) != codes.Canceled {
		t.Errorf("client: %v", err)
	}
	if e := <-ev.completed; e.Status != executor.Cancelled {
		t.Fatalf("waiting call ended %v", e.Status)
	}
	if s, _ := ex.GroupStats("a"); s.Waiting != 0 || s.InFlight != 1 {
		t.Fatalf("%+v: the cancelled call kept its place", s)
	}
	third := make(chan error)
	go func() { _, err := call(context.Background(), cc, "a", "3"); third <- err }()
	<-ev.submitted
	g.release()
	if err := <-first; err != nil {
		t.Error(err)
	}
	if err := <-third; err != nil {
		t.Error(err)
	}
	close(g.entered)
	var got []string
	for v := range g.entered {
		got = append(got, v)
	}
	if len(got) != 1 || got[0] != "3" || g.served.Load() != 2 {
		t.Errorf("after the first, the handler saw %v (served %d): want only 3", got, g.served.Load())
	}
}

// A panic in the handler goes on unchanged, and the slot is released: gRPC
// does not recover it, so a recovery interceptor chained before ours turns it
// into an error here.
func TestUnaryPanicReleasesTheSlot(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxInFlight(1)})
	icp := grpcadmit.UnaryServerInterceptor(ex)
	var seen any
	recoverer := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (resp any, err error) {
		defer func() {
			if v := recover(); v != nil {
				seen = v
				err = status.Error(codes.Internal, "panic")
			}
		}()
		return h(ctx, req)
	}
	g := newGate()
	g.release()
	g.reply = func(_ context.Context, in string) error {
		if in == "panic" {
			panic("boom")
		}
		return nil
	}
	cc := dial(t, start(t, g, grpc.ChainUnaryInterceptor(recoverer, icp)))
	if _, err := call(context.Background(), cc, "a", "panic"); status.Code(err) != codes.Internal || seen != "boom" {
		t.Fatalf("err %v, recovered %v", err, seen)
	}
	if _, err := call(context.Background(), cc, "a", "x"); err != nil {
		t.Errorf("after the panic: %v: the slot was not released", err)
	}
	if s, _ := ex.GroupStats("a"); s.Failed != 1 || s.Succeeded != 1 {
		t.Errorf("%+v", s.TaskCounts)
	}
}

// A stream holds its slot until its handler returns.
func TestStreamHoldsItsSlotForItsLife(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxInFlight(1)})
	g := newGate()
	g.release()
	cc := dial(t, start(t, g, grpc.ChainStreamInterceptor(grpcadmit.StreamServerInterceptor(ex)), unary(ex)))
	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-tenant", "s")
	cs, err := cc.NewStream(ctx, &gateDesc.Streams[0], "/test.Gate/Echo")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"one", "two"} {
		if err := cs.SendMsg(wrapperspb.String(m)); err != nil {
			t.Fatal(err)
		}
		out := new(wrapperspb.StringValue)
		if err := cs.RecvMsg(out); err != nil || out.Value != m {
			t.Fatalf("echo %q %v", out.Value, err)
		}
	}
	if _, err := call(context.Background(), cc, "s", "x"); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("a call while the stream is open: %v", err)
	}
	cs2, err := cc.NewStream(ctx, &gateDesc.Streams[0], "/test.Gate/Echo")
	if err != nil {
		t.Fatal(err)
	}
	if err := cs2.RecvMsg(new(wrapperspb.StringValue)); status.Code(err) != codes.ResourceExhausted || retryDelay(err) != time.Second {
		t.Errorf("a second stream: %v", err)
	}
	cs.CloseSend()
	if err := cs.RecvMsg(new(wrapperspb.StringValue)); err == nil {
		t.Fatal("stream did not end")
	}
	// The handler has returned, so the slot is free once the status is in.
	if _, err := call(context.Background(), cc, "s", "x"); err != nil {
		t.Errorf("after the stream: %v", err)
	}
	if s, _ := ex.GroupStats("s"); s.Succeeded != 2 || s.Rejected != 2 {
		t.Errorf("%+v", s.TaskCounts)
	}
}

// Invalid options panic naming the option.
func TestInvalidOptionsPanic(t *testing.T) {
	ex := newExec(t, nil)
	for _, tc := range []struct {
		opt  grpcadmit.Option
		want string
	}{
		{grpcadmit.WithTenantKey(""), `WithTenantKey("")`},
		{grpcadmit.WithTenantKey("x tenant"), `WithTenantKey("x tenant")`},
		{grpcadmit.WithTenantKey("x-tenant:"), `WithTenantKey("x-tenant:")`},
		{grpcadmit.WithTenantKey("grpc-timeout"), `WithTenantKey("grpc-timeout")`},
		{grpcadmit.WithTenantKey("TE"), `WithTenantKey("TE")`},
		{grpcadmit.WithTenantKey("User-Agent"), `WithTenantKey("User-Agent")`},
		{grpcadmit.WithTenantFunc(nil), "WithTenantFunc(nil)"},
		{grpcadmit.WithDefaultGroup(""), `WithDefaultGroup("")`},
		{grpcadmit.WithRetryAfter(-time.Second), "WithRetryAfter(-1s)"},
		{grpcadmit.WithFailure(nil), "WithFailure(nil)"},
		{grpcadmit.WithWeightFunc(nil), "WithWeightFunc(nil)"},
		{nil, "nil Option"},
	} {
		for name, build := range map[string]func(){
			"unary":  func() { grpcadmit.UnaryServerInterceptor(ex, tc.opt) },
			"stream": func() { grpcadmit.StreamServerInterceptor(ex, tc.opt) },
			"client": func() { grpcadmit.UnaryClientInterceptor(ex, tc.opt) },
		} {
			func() {
				defer func() {
					if v, _ := recover().(string); !strings.Contains(v, tc.want) {
						t.Errorf("%s: panic %q, want it to name %s", name, v, tc.want)
					}
				}()
				build()
			}()
		}
	}
}

// Close cancels the context of the streams being served; a caller that did
// not cancel gets the handler's cancellation as Unavailable (answer).
func TestStreamContextEndsOnClose(t *testing.T) {
	ex := newExec(t, nil)
	g := newGate()
	cc := dial(t, start(t, g, grpc.ChainStreamInterceptor(grpcadmit.StreamServerInterceptor(ex))))
	cs, err := cc.NewStream(context.Background(), &gateDesc.Streams[1], "/test.Gate/Wait")
	if err != nil {
		t.Fatal(err)
	}
	cs.CloseSend()
	<-g.entered
	ex.Close()
	if err := cs.RecvMsg(new(wrapperspb.StringValue)); status.Code(err) != codes.Unavailable {
		t.Errorf("stream ended with %v, want Unavailable from the executor's Close", err)
	}
}

// A tenant or weight function that answers with a gRPC status (a caller
// without credentials: Unauthenticated) has the call refused with that
// status, its code, message and details, and no pushback: the function,
// not the interceptor, says what the caller did wrong and whether to
// retry. A plain error is InvalidArgument with its text, as before.
func TestFunctionStatusIsSent(t *testing.T) {
	unauthenticated := status.New(codes.Unauthenticated, "no credentials")
	lookupDown := status.New(codes.Unavailable, "identity service unavailable")
	for _, tc := range []struct {
		name string
		opt  grpcadmit.Option
		want *status.Status
	}{
		{"tenant status", grpcadmit.WithTenantFunc(func(context.Context) (string, error) {
			return "", unauthenticated.Err()
		}), unauthenticated},
		{"tenant status wrapped", grpcadmit.WithTenantFunc(func(context.Context) (string, error) {
			return "", fmt.Errorf("lookup 10.0.0.1: %w", lookupDown.Err())
		}), lookupDown},
		{"weight status", grpcadmit.WithWeightFunc(func(context.Context, string) (int, error) {
			return 0, unauthenticated.Err()
		}), unauthenticated},
		{"plain error", grpcadmit.WithTenantFunc(func(context.Context) (string, error) {
			return "", errors.New("no tenant claim")
		}), status.New(codes.InvalidArgument, "httpadmit: invalid tenant: no tenant claim")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ex := newExec(t, nil)
			g := newGate()
			g.release()
			cc := dial(t, start(t, g, unary(ex, tc.opt)))
			var trailer metadata.MD
			err := cc.Invoke(context.Background(), "/test.Gate/Call", wrapperspb.String("x"), new(wrapperspb.StringValue), grpc.Trailer(&trailer))
			st := status.Convert(err)
			if st.Code() != tc.want.Code() || st.Message() != tc.want.Message() {
				t.Fatalf("%v, want %v %q", err, tc.want.Code(), tc.want.Message())
			}
			wantPushback := []string{"-1"}
			if tc.name != "plain error" {
				wantPushback = nil
			}
			if v := trailer.Get("grpc-retry-pushback-ms"); !slices.Equal(v, wantPushback) {
				t.Errorf("pushback %q, want %q", v, wantPushback)
			}
			if s := ex.Stats(); s.Submitted != 0 || g.served.Load() != 0 {
				t.Errorf("the refused call reached the executor or the handler: %+v", s.TaskCounts)
			}
		})
	}
}

// A tenant or weight function's error matching httpadmit.ErrUnavailable
// (the lookup it needs is down) is the server's failure, as in httpadmit:
// Unavailable with RetryInfo and a pushback, without the function's text,
// where a plain error is InvalidArgument, which tells the caller not to
// retry.
func TestFunctionUnavailableIsSentUnavailable(t *testing.T) {
	down := fmt.Errorf("%w: dial 10.0.0.7:5432: connection refused", httpadmit.ErrUnavailable)
	for name, opt := range map[string]grpcadmit.Option{
		"tenant": grpcadmit.WithTenantFunc(func(context.Context) (string, error) { return "", down }),
		"weight": grpcadmit.WithWeightFunc(func(context.Context, string) (int, error) { return 0, down }),
	} {
		ex := newExec(t, nil)
		g := newGate()
		g.release()
		cc := dial(t, start(t, g, unary(ex, opt)))
		var trailer metadata.MD
		err := cc.Invoke(context.Background(), "/test.Gate/Call", wrapperspb.String("x"), new(wrapperspb.StringValue), grpc.Trailer(&trailer))
		st := status.Convert(err)
		if st.Code() != codes.Unavailable || strings.Contains(st.Message(), "10.0.0.7") {
			t.Errorf("%s: %v, want Unavailable without the function's text", name, err)
		}
		if len(st.Details()) != 1 || !slices.Equal(trailer.Get("grpc-retry-pushback-ms"), []string{"1000"}) {
			t.Errorf("%s: details %v, pushback %q; want RetryInfo and 1000", name, st.Details(), trailer.Get("grpc-retry-pushback-ms"))
		}
	}
}
