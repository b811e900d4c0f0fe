package executor

import (
	"context"
	"testing"
	"time"

	"github.com/groupexec/groupexec/policy"
)

// grantingLimiter hands out every permit asked for: with it, no start is
// made on a finished task's freed permits (startFreedLocked), which go
// through the dispatcher instead (transit).
type grantingLimiter struct{}

func (grantingLimiter) Attach(func(string)) error { return nil }
func (grantingLimiter) TryAcquire(string, int) (LimiterPermit, error) {
	return grantedPermit{}, nil
}

type grantedPermit struct{}

func (grantedPermit) Bind(ctx context.Context, _ context.CancelCauseFunc) context.Context { return ctx }
func (grantedPermit) Release()                                                            {}

// A finished task whose global permits pass to the dispatcher (transit)
// completes its handle only once they are back, as every task's does:
// while another goroutine holds the dispatcher's mutex, and the finish's
// resync waits for it, the handle does not complete with its permits still
// counted in use by nobody.
func TestHandleCompletesAfterTransitIsBack(t *testing.T) {
	p, err := policy.New(policy.WithGlobalMaxInFlight(1), policy.WithDefaultMaxConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	ex, err := New(p, WithGroupLimiter(grantingLimiter{}))
	if err != nil {
		t.Fatal(err)
	}
	defer ex.Close()
	release := make(chan struct{})
	a, _ := Submit(ex, context.Background(), Task[int]{Group: "g", Fn: func(context.Context) (int, error) { <-release; return 1, nil }})
	b, _ := Submit(ex, context.Background(), Task[int]{Group: "g", Fn: func(context.Context) (int, error) { return 2, nil }})
	g := ex.groups.load("g")
	// Another goroutine's dispatch, or a Stats call, holds the dispatcher's
	// mutex while A finishes.
	ex.disp.mu.Lock()
	close(release)
	deferred := func() bool { return g.unsettled.Load() == 1 }
	for deadline := time.Now().Add(time.Minute); !a.done.Load() && !deferred(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			ex.disp.mu.Unlock()
			t.Fatal("A neither completed nor waited for the dispatcher in a minute")
		}
	}
	if a.done.Load() {
		g.mu.Lock()
		transit, running := g.transit, g.running
		g.mu.Unlock()
		used := ex.global.used.Load()
		ex.disp.mu.Unlock()
		t.Fatalf("A's handle completed with its global permits not back: %d in use, group running %d, in transit %d", used, running, transit)
	}
	ex.disp.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // a hang guard
	defer cancel()
	for _, h := range []*Handle[int]{a, b} {
		if r, err := h.Wait(ctx); err != nil || r.Status != Success {
			t.Fatalf("%+v %v", r, err)
		}
	}
	if err := ex.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
}
