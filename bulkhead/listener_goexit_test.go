package bulkhead_test

import (
	"context"
	"errors"
	"runtime"
	"testing"

	"github.com/groupexec/groupexec/bulkhead"
)

// exitOn returns a bulkhead of limit 1 whose listener exits the goroutine
// it is told of an event with the given code on (runtime.Goexit, which no
// recover stops).
func exitOn(t *testing.T, code string) *bulkhead.Bulkhead {
	t.Helper()
	return newBH(t, 1, bulkhead.WithListener(bulkhead.ListenerFunc(func(e bulkhead.Event) {
		if e.Code == code {
			runtime.Goexit()
		}
	})))
}

// A listener call that exits the goroutine running a Submit's function,
// told of its latency or of its permit's release, still lets the handle
// complete with the function's outcome, its permit back.
func TestListenerGoexitInRunStillCompletes(t *testing.T) {
	errBoom := errors.New("boom")
	fns := []struct {
		name string
		fn   func(context.Context) (int, error)
		want bulkhead.Status
		err  error
	}{
		{"returns", func(context.Context) (int, error) { return 7, nil }, bulkhead.Success, nil},
		{"panics", func(context.Context) (int, error) { panic(errBoom) }, bulkhead.Failed, errBoom},
		{"exits", func(context.Context) (int, error) { runtime.Goexit(); return 0, nil }, bulkhead.Failed, bulkhead.ErrGoexit},
	}
	for _, code := range []string{bulkhead.EventLatencyReport, bulkhead.EventPermitReleased} {
		for _, f := range fns {
			t.Run(code+"/"+f.name, func(t *testing.T) {
				b := exitOn(t, code)
				r := result(t, submit(t, b, f.fn))
				if r.Status != f.want || !errors.Is(r.Err, f.err) {
					t.Fatalf("result %+v, want %v with %v", r, f.want, f.err)
				}
				if f.want == bulkhead.Success && r.Value != 7 {
					t.Fatalf("result %+v, want the function's value", r)
				}
				if b.InFlight() != 0 {
					t.Fatalf("%d in flight after the handle completed", b.InFlight())
				}
			})
		}
	}
}

// A listener call, told of the permit's release, that exits the goroutine
// of a Cancel caller still lets the handle, which others may wait on,
// complete Cancelled, and the function's context end with ErrCancelled.
func TestListenerGoexitOnCancelStillCompletes(t *testing.T) {
	b := exitOn(t, bulkhead.EventPermitReleased)
	started, cause := make(chan struct{}), make(chan error, 1)
	h := submit(t, b, func(ctx context.Context) (int, error) {
		close(started)
		<-ctx.Done()
		cause <- context.Cause(ctx)
		return 0, ctx.Err()
	})
	<-started
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		h.Cancel()
	}()
	<-exited
	if r := result(t, h); r.Status != bulkhead.Cancelled {
		t.Fatalf("result %+v, want Cancelled", r)
	}
	if err := <-cause; !errors.Is(err, bulkhead.ErrCancelled) {
		t.Fatalf("the function's context ended with %v, want ErrCancelled", err)
	}
}
