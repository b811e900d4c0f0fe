package httpadmit_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/httpadmit"
	"github.com/groupexec/groupexec/internal/adaptertest"
	"github.com/groupexec/groupexec/policy"
)

func runInCallerExec(t *testing.T) *executor.Executor {
	return newExec(t, []policy.Option{policy.WithDefaultMaxInFlight(1)},
		executor.WithRejectionHandler(func(r *executor.Rejection) error {
			r.RunInCaller()
			return nil
		}))
}

// A handler run in the caller by a rejection handler that panics with
// http.ErrAbortHandler goes on to the server with the same value, and
// nothing is written after what the handler wrote.
func TestHandlerPanicRunInCallerGoesOn(t *testing.T) {
	ex := runInCallerExec(t)
	defer adaptertest.FillSlot(t, ex, "a")()
	h := httpadmit.Handler(ex, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusAccepted)
		panic(http.ErrAbortHandler)
	}), httpadmit.WithTenantFunc(func(*http.Request) (string, error) { return "a", nil }))
	rec := httptest.NewRecorder()
	panicked := servePanic(h, rec)
	if panicked != http.ErrAbortHandler {
		t.Errorf("ServeHTTP's panic = %v, want http.ErrAbortHandler", panicked)
	}
	if rec.Code != http.StatusAccepted || rec.Body.Len() != 0 {
		t.Errorf("response: %d %q, want 202 and no body as the handler wrote", rec.Code, rec.Body.String())
	}
}

// otherGoroutineExec is runInCallerExec whose rejection handler runs the
// refused request on a goroutine of its own, and waits for it.
func otherGoroutineExec(t *testing.T) *executor.Executor {
	return newExec(t, []policy.Option{policy.WithDefaultMaxInFlight(1)},
		executor.WithRejectionHandler(adaptertest.RunElsewhere))
}

// A handler that a rejection handler runs on another goroutine, and that
// calls runtime.Goexit there, ends that goroutine only. The request's
// response is aborted, as net/http aborts one whose handler exits its
// goroutine: ServeHTTP panics with http.ErrAbortHandler, which the server
// neither logs nor answers, not with the executor's error, which it would
// log as a handler's panic.
func TestHandlerGoexitOnAnotherGoroutineAborts(t *testing.T) {
	ex := otherGoroutineExec(t)
	defer adaptertest.FillSlot(t, ex, "a")()
	h := httpadmit.Handler(ex, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		runtime.Goexit()
	}), httpadmit.WithTenantFunc(func(*http.Request) (string, error) { return "a", nil }))
	rec := httptest.NewRecorder()
	panicked := servePanic(h, rec)
	if panicked != http.ErrAbortHandler {
		t.Errorf("ServeHTTP's panic = %v, want http.ErrAbortHandler", panicked)
	}
	if rec.Body.Len() != 0 || len(rec.Header()) != 0 {
		t.Errorf("response: %d %q, want nothing written", rec.Code, rec.Body.String())
	}
}

// A base RoundTripper that a rejection handler runs on another goroutine,
// and that calls runtime.Goexit there, ends that goroutine only: RoundTrip
// returns an error matching executor.ErrGoexit, never a nil response with
// a nil error, and the request's body, which base did not close, is
// closed, as the RoundTripper contract asks.
func TestTransportBaseGoexitOnAnotherGoroutine(t *testing.T) {
	ex := otherGoroutineExec(t)
	defer adaptertest.FillSlot(t, ex, "svc.test:80")()
	rt := httpadmit.Transport(ex, roundTripper(func(*http.Request) (*http.Response, error) {
		runtime.Goexit()
		return nil, nil
	}))
	body := &countedBody{Reader: strings.NewReader("x")}
	req, _ := http.NewRequest(http.MethodPost, "http://svc.test/", body)
	resp, err := rt.RoundTrip(req)
	if resp != nil || !errors.Is(err, executor.ErrGoexit) {
		t.Errorf("RoundTrip = %v, %v; want a nil response and an error matching executor.ErrGoexit", resp, err)
	}
	if n := body.closes.Load(); n != 1 {
		t.Errorf("the request's body was closed %d times, want 1", n)
	}
}

// A rejection handler that runs a refused request on a goroutine of its
// own (Rejection.RunInCaller) and exits the Transport's goroutine without
// waiting for it ends RoundTrip's caller too, as it would end a Do
// caller's. The request, which the other goroutine sends after all, is
// handed over to no one: its response's body is closed there, once.
func TestTransportRejectionHandlerExitsWhileRunInCallerSends(t *testing.T) {
	entered, proceed, sent := make(chan struct{}), make(chan struct{}), make(chan struct{})
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxInFlight(1)},
		executor.WithRejectionHandler(func(r *executor.Rejection) error {
			go func() {
				defer close(sent)
				r.RunInCaller()
			}()
			<-entered // RunInCaller won the race: the request is with base
			runtime.Goexit()
			return nil
		}))
	defer adaptertest.FillSlot(t, ex, "svc.test:80")()
	respBody := &countedBody{Reader: strings.NewReader("reply")}
	rt := httpadmit.Transport(ex, roundTripper(func(r *http.Request) (*http.Response, error) {
		close(entered)
		<-proceed
		return &http.Response{StatusCode: http.StatusOK, Body: respBody, Request: r}, nil
	}))
	ended, returned := make(chan struct{}), false
	go func() {
		defer close(ended)
		req, _ := http.NewRequest(http.MethodGet, "http://svc.test/", nil)
		resp, err := rt.RoundTrip(req)
		if err == nil {
			resp.Body.Close()
		}
		returned = true
	}()
	<-ended
	close(proceed) // base answers only once the caller is gone
	<-sent
	if returned {
		t.Error("RoundTrip returned; want its caller's goroutine to exit, as the rejection handler's did")
	}
	if n := respBody.closes.Load(); n != 1 {
		t.Errorf("the response's body, handed over to no one, was closed %d times, want 1", n)
	}
}

// armedContext is a context that never ends and whose Err panics once
// armed, as a faulty context of the caller's may.
type armedContext struct {
	context.Context
	armed atomic.Bool
}

func (c *armedContext) Done() <-chan struct{} { return make(chan struct{}) }

func (c *armedContext) Err() error {
	if c.armed.Load() {
		panic("context broke")
	}
	return nil
}

// A request context that panics where a rejection handler's RunInCaller,
// on another goroutine, asks it, which the executor recovers into a
// *executor.PanicError, panics in RoundTrip's caller, as if it had been
// asked there, rather than fail RoundTrip as a base that exited its
// goroutine; the request's body is closed once.
func TestTransportRequestContextPanicsInRunInCaller(t *testing.T) {
	ctx := &armedContext{Context: context.Background()}
	ex := newExec(t, []policy.Option{policy.WithDefaultMaxInFlight(1)},
		executor.WithRejectionHandler(func(r *executor.Rejection) error {
			ctx.armed.Store(true)
			return adaptertest.RunElsewhere(r)
		}))
	defer adaptertest.FillSlot(t, ex, "svc.test:80")()
	rt := httpadmit.Transport(ex, roundTripper(func(*http.Request) (*http.Response, error) {
		t.Error("a request whose context panicked was sent")
		return nil, errors.New("sent")
	}))
	body := &countedBody{Reader: strings.NewReader("x")}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://svc.test/", body)
	func() {
		defer func() {
			if v := recover(); v != "context broke" {
				t.Errorf("recovered %v, want %q", v, "context broke")
			}
		}()
		rt.RoundTrip(req)
	}()
	if n := body.closes.Load(); n != 1 {
		t.Errorf("the request's body was closed %d times, want 1", n)
	}
}

// servePanic serves a GET of / with h into rec, and returns the value
// ServeHTTP panicked with (nil if it returned).
func servePanic(h http.Handler, rec *httptest.ResponseRecorder) (v any) {
	defer func() { v = recover() }()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	return nil
}
