package httpadmit_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/httpadmit"
	"github.com/groupexec/groupexec/policy"
)

// cancelWaitSetup returns a Transport whose destination's only slot is
// held by an open body, so that the next request waits in its queue, and
// the number of requests its base has seen.
func cancelWaitSetup(t *testing.T, ev *events) (http.RoundTripper, *executor.Executor, *atomic.Int64) {
	t.Helper()
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(1), policy.WithDefaultMaxInFlight(2)}, ev.listener())
	var sent atomic.Int64
	base := roundTripper(func(r *http.Request) (*http.Response, error) {
		sent.Add(1)
		return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(strings.NewReader("ok")), Request: r}, nil
	})
	rt := httpadmit.Transport(ex, base)
	first, _ := http.NewRequest(http.MethodGet, "http://svc.test/", nil)
	resp, err := rt.RoundTrip(first)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	next(t, ev.submitted)
	return rt, ex, &sent
}

// A request whose only cancellation is its Cancel channel (its caller's
// own; http.Client sets one too, for a Transport it does not know, beside
// a context with its Timeout's deadline) leaves its destination's queue
// once the channel is closed, as net/http gives it up: RoundTrip returns a
// cancellation, nothing is sent, and its place is free.
func TestTransportCancelChannelEndsTheWait(t *testing.T) {
	ev := newEvents()
	rt, ex, sent := cancelWaitSetup(t, ev)
	req, _ := http.NewRequest(http.MethodGet, "http://svc.test/", nil)
	cancel := make(chan struct{})
	//lint:ignore SA1019 http.Client sets it for a Transport it does not know
	req.Cancel = cancel
	errc := make(chan error, 1)
	go func() {
		resp, err := rt.RoundTrip(req)
		if resp != nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	next(t, ev.submitted) // the second request is in line
	close(cancel)
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("RoundTrip: %v, want an error matching context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("RoundTrip still waiting 10s after the request's Cancel channel was closed")
	}
	if n := sent.Load(); n != 1 {
		t.Errorf("the base saw %d requests, want 1: the cancelled one is not sent", n)
	}
	if s, _ := ex.GroupStats("svc.test:80"); s.Waiting != 0 || s.InFlight != 1 {
		t.Errorf("%d waiting, %d in flight after the cancelled request left, want 0 and 1", s.Waiting, s.InFlight)
	}
}

// A request whose Cancel channel was closed before it was admitted is not
// sent: base would fail it at once, unsent, with an error counted as the
// destination's failure.
func TestTransportCancelChannelClosedBeforeAdmissionIsNotSent(t *testing.T) {
	ev := newEvents()
	ex := newExec(t, nil, ev.listener())
	var sent atomic.Int64
	rt := httpadmit.Transport(ex, roundTripper(func(r *http.Request) (*http.Response, error) {
		sent.Add(1)
		return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody, Request: r}, nil
	}))
	req, _ := http.NewRequest(http.MethodGet, "http://svc.test/", nil)
	cancel := make(chan struct{})
	close(cancel)
	//lint:ignore SA1019 http.Client sets it for a Transport it does not know
	req.Cancel = cancel
	if _, err := rt.RoundTrip(req); !errors.Is(err, context.Canceled) {
		t.Errorf("RoundTrip: %v, want an error matching context.Canceled", err)
	}
	if n := sent.Load(); n != 0 {
		t.Errorf("the base saw %d requests, want 0", n)
	}
	if e := next(t, ev.completed); e.Status == executor.Failed {
		t.Errorf("completed %v (%v), want no failure of the destination", e.Status, e.Err)
	}
}

// A request with a Cancel channel that is never closed is sent and its
// slot freed at Body.Close as any other. Admitted at once, it pays no
// goroutine to watch its channel, which only a queue wait needs watched:
// http.Client gives such a channel to every request with a Timeout sent
// through a RoundTripper it does not know, a Transport, with a context of
// the same deadline. (For one that waited in its queue, see
// TestTransportCancelChannelWatchedInTheQueueEndsWithTheRequest.)
func TestTransportCancelChannelNeverClosed(t *testing.T) {
	ev := newEvents()
	ex := newExec(t, nil, ev.listener())
	rt := httpadmit.Transport(ex, roundTripper(func(r *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(strings.NewReader("ok")), Request: r}, nil
	}))
	req, _ := http.NewRequest(http.MethodGet, "http://svc.test/", nil)
	//lint:ignore SA1019 http.Client sets it for a Transport it does not know
	req.Cancel = make(chan struct{})
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	if n := parkedInAdmission(); n != 0 {
		t.Errorf("%d goroutines watch the admission of a request admitted at once, want 0", n)
	}
	if b, _ := io.ReadAll(resp.Body); string(b) != "ok" {
		t.Errorf("body %q, want ok", b)
	}
	resp.Body.Close()
	if n := inFlight(ex, "svc.test:80"); n != 0 {
		t.Errorf("%d in flight after Body.Close", n)
	}
	if e := next(t, ev.completed); e.Status != executor.Success {
		t.Errorf("completed %v (%v), want Success", e.Status, e.Err)
	}
}

// A request whose Cancel channel is closed as it is admitted (here by a
// listener told of its start, after the executor looked at its context) is
// not sent either.
func TestTransportCancelChannelClosedAsAdmittedIsNotSent(t *testing.T) {
	cancel := make(chan struct{})
	ex := newExec(t, nil, executor.WithListener(executor.ListenerFuncs{
		Started: func(executor.Event) { close(cancel) },
	}))
	var sent atomic.Int64
	rt := httpadmit.Transport(ex, roundTripper(func(r *http.Request) (*http.Response, error) {
		sent.Add(1)
		return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody, Request: r}, nil
	}))
	req, _ := http.NewRequest(http.MethodGet, "http://svc.test/", nil)
	//lint:ignore SA1019 http.Client sets it for a Transport it does not know
	req.Cancel = cancel
	if _, err := rt.RoundTrip(req); !errors.Is(err, context.Canceled) {
		t.Errorf("RoundTrip: %v, want an error matching context.Canceled", err)
	}
	if n := sent.Load(); n != 0 {
		t.Errorf("the base saw %d requests, want 0", n)
	}
}
