package httpadmit_test

import (
	"context"
	"errors"
	"net/http"
	"runtime"
	"strings"
	"testing"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/httpadmit"
	"github.com/groupexec/groupexec/policy"
)

// A base that panics or calls runtime.Goexit before it closed the
// request's body has not kept the RoundTripper contract for RoundTrip,
// which must close it whatever happens: RoundTrip closes it, once, and the
// slot is free.
func TestTransportClosesBodyWhenBaseDoesNotReturn(t *testing.T) {
	for _, tc := range []struct {
		name string
		base func(*http.Request) (*http.Response, error)
	}{
		{"panic", func(*http.Request) (*http.Response, error) { panic("base broke") }},
		{"abort", func(*http.Request) (*http.Response, error) { panic(http.ErrAbortHandler) }},
		{"goexit", func(*http.Request) (*http.Response, error) { runtime.Goexit(); return nil, nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ex := newExec(t, []policy.Option{policy.WithDefaultMaxInFlight(1)})
			rt := httpadmit.Transport(ex, roundTripper(tc.base))
			body := &countedBody{Reader: strings.NewReader("payload")}
			req, _ := http.NewRequest(http.MethodPost, "http://svc.test/", body)
			ended := make(chan struct{})
			go func() {
				defer close(ended)
				defer func() { _ = recover() }()
				_, _ = rt.RoundTrip(req)
			}()
			<-ended
			if n := body.closes.Load(); n != 1 {
				t.Errorf("body closed %d times, want 1", n)
			}
			if n := inFlight(ex, "svc.test:80"); n != 0 {
				t.Errorf("%d in flight, want 0", n)
			}
		})
	}
}

// Every request RoundTrip does not pass to base has its body closed once:
// one refused for lack of room, one whose context ended while it waited,
// one refused by the executor's shutdown.
func TestTransportClosesAnUnsentBodyOnce(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(1), policy.WithDefaultMaxInFlight(2)})
	hold := make(chan struct{})
	entered := make(chan struct{}, 1)
	base := roundTripper(func(r *http.Request) (*http.Response, error) {
		if r.Body != nil {
			r.Body.Close()
		}
		entered <- struct{}{}
		<-hold
		return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody}, nil
	})
	rt := httpadmit.Transport(ex, base)
	send := func(ctx context.Context) (*countedBody, error) {
		body := &countedBody{Reader: strings.NewReader("payload")}
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://svc.test/", body)
		_, err := rt.RoundTrip(req)
		return body, err
	}
	first := make(chan error, 1)
	go func() { _, err := send(context.Background()); first <- err }()
	<-entered

	// Queued, then cancelled.
	ctx, cancel := context.WithCancel(context.Background())
	waited := make(chan struct{})
	var cancelled *countedBody
	var cerr error
	go func() { defer close(waited); cancelled, cerr = send(ctx) }()
	for ex.Stats().Waiting == 0 {
		runtime.Gosched()
	}
	// Refused: the queue is full.
	if b, err := send(context.Background()); !errors.Is(err, executor.ErrRejected) || b.closes.Load() != 1 {
		t.Errorf("refused: %v, body closed %d times; want ErrRejected and 1", err, b.closes.Load())
	}
	cancel()
	<-waited
	if !errors.Is(cerr, context.Canceled) || cancelled.closes.Load() != 1 {
		t.Errorf("cancelled while waiting: %v, body closed %d times; want context.Canceled and 1", cerr, cancelled.closes.Load())
	}
	close(hold)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if err := ex.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if b, err := send(context.Background()); !errors.Is(err, executor.ErrShutdown) || b.closes.Load() != 1 {
		t.Errorf("after shutdown: %v, body closed %d times; want ErrShutdown and 1", err, b.closes.Load())
	}
}

// A Transport stacked above another (one group per tenant above one per
// destination) does not close again a body that the Transport below closed
// when its base panicked or exited.
func TestStackedTransportClosesBodyOnceWhenBaseDoesNotReturn(t *testing.T) {
	for _, tc := range []struct {
		name string
		base func(*http.Request) (*http.Response, error)
	}{
		{"panic", func(*http.Request) (*http.Response, error) { panic("base broke") }},
		{"goexit", func(*http.Request) (*http.Response, error) { runtime.Goexit(); return nil, nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ex := newExec(t, nil)
			inner := httpadmit.Transport(ex, roundTripper(tc.base))
			rt := httpadmit.Transport(ex, inner, httpadmit.WithTenantHeader("X-Tenant"))
			body := &countedBody{Reader: strings.NewReader("payload")}
			req, _ := http.NewRequest(http.MethodPost, "http://svc.test/", body)
			req.Header.Set("X-Tenant", "acme")
			ended := make(chan struct{})
			go func() {
				defer close(ended)
				defer func() { _ = recover() }()
				_, _ = rt.RoundTrip(req)
			}()
			<-ended
			if n := body.closes.Load(); n != 1 {
				t.Errorf("body closed %d times, want 1", n)
			}
		})
	}
}
