package executor

import (
	"context"
	"testing"

	"github.com/groupexec/groupexec/policy"
)

// TestWatchedStaysBounded: a goroutine that outlives its task and asks the
// task's context for Done lists a job that nothing unlists when the run
// has already ended without a side struct; the watched set prunes those as
// it grows, so a long-lived group does not keep them all. A task whose
// Done is asked for while it runs is unlisted when it ends.
func TestWatchedStaysBounded(t *testing.T) {
	p, _ := policy.New()
	ex, err := New(p)
	if err != nil {
		t.Fatal(err)
	}
	defer ex.Close()
	ctx := context.Background()
	const n = 1000
	for i := range n {
		var late context.Context
		h, err := Submit(ex, ctx, Task[int]{Group: "g", Fn: func(ctx context.Context) (int, error) {
			if i%2 == 0 {
				_ = ctx.Done() // asked for while running: unlisted at the end
			}
			late = ctx
			return 0, nil
		}})
		if err != nil {
			t.Fatal(err)
		}
		h.Wait(ctx)
		late.Done() // after the run ended
	}
	g := ex.groups.load("g")
	g.runMu.Lock()
	listed := len(g.watched)
	g.runMu.Unlock()
	// Pruning leaves at most twice what was live at the last prune, and
	// nothing was live: at most 64, plus what was listed since.
	if listed > 2*64 {
		t.Errorf("%d of %d ended tasks still listed in the watched set", listed, n)
	}
}
