package httpadmit_test

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/httpadmit"
)

// lateCtx is a request context whose end reaches the functions registered
// with context.AfterFunc only when the test delivers it, as a context's
// AfterFunc goroutine may run a moment after the context has ended.
type lateCtx struct {
	context.Context
	mu    sync.Mutex
	done  chan struct{}
	ended bool
	fns   map[int]func()
	n     int
}

func newLateCtx() *lateCtx {
	return &lateCtx{Context: context.Background(), done: make(chan struct{}), fns: map[int]func(){}}
}

func (c *lateCtx) Done() <-chan struct{} { return c.done }

func (c *lateCtx) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ended {
		return context.Canceled
	}
	return nil
}

// end cancels the context, without running its AfterFunc functions yet.
func (c *lateCtx) end() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.ended {
		c.ended = true
		close(c.done)
	}
}

// deliver runs the AfterFunc functions not stopped.
func (c *lateCtx) deliver() {
	c.mu.Lock()
	fns := c.fns
	c.fns = map[int]func(){}
	c.mu.Unlock()
	for _, f := range fns {
		f()
	}
}

// AfterFunc is what context.AfterFunc uses for a context that has it.
func (c *lateCtx) AfterFunc(f func()) func() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	id := c.n
	c.n++
	c.fns[id] = f
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		_, ok := c.fns[id]
		delete(c.fns, id)
		return ok
	}
}

// A request whose context has ended by the time the executor decides to
// start it, before the end has reached the admission's context, is not
// started: the executor's Started count and its listener never see a
// request that was not sent.
func TestTransportEndedContextIsNotStarted(t *testing.T) {
	ctx := newLateCtx()
	ev := newEvents()
	ex := newExec(t, nil, executor.WithListener(executor.ListenerFuncs{
		Submitted: func(executor.Event) { ctx.end() }, // after the admission's context is made
		Started:   func(e executor.Event) { ev.started <- e },
	}))
	base := roundTripper(func(*http.Request) (*http.Response, error) {
		t.Error("the request was sent")
		return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody}, nil
	})
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://svc.test/", nil)
	_, err := httpadmit.Transport(ex, base).RoundTrip(req)
	ctx.deliver()
	if !errors.Is(err, context.Canceled) {
		t.Errorf("RoundTrip: %v, want Canceled", err)
	}
	if s := ex.Stats(); s.Started != 0 || s.Cancelled != 1 {
		t.Errorf("%d started, %d cancelled; want 0 and 1", s.Started, s.Cancelled)
	}
	if len(ev.started) != 0 {
		t.Errorf("the listener heard %d starts, want none", len(ev.started))
	}
}
