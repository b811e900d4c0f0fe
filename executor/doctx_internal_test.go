package executor

import (
	"context"
	"errors"
	"testing"

	"github.com/groupexec/groupexec/policy"
)

// A Done that another goroutine asks of fn's context while fn returns may
// have counted itself in (enter) but not yet reached the task when the
// call ends. Once Do has returned, fn's context is done all the same: Err
// reports the end, and the channel that Done hands out is closed, and the
// task is left in no watched set.
func TestDoContextDoneUnderWayAtTheEnd(t *testing.T) {
	p, err := policy.New()
	if err != nil {
		t.Fatal(err)
	}
	ex, err := New(p)
	if err != nil {
		t.Fatal(err)
	}
	defer ex.Close()
	parent, cancel := context.WithCancel(context.Background())
	defer cancel()
	var c *doCtx
	if err := ex.Do(parent, "g", func(ctx context.Context) error {
		var ok bool
		if c, ok = ctx.(*doCtx); !ok {
			return errors.New("fn's context is not a doCtx")
		}
		// The other goroutine's Done has begun: it runs on below.
		if !c.enter(true) {
			return errors.New("enter refused while the call runs")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := c.Err(); !errors.Is(err, context.Canceled) {
		t.Errorf("Err once Do has returned = %v, want context.Canceled", err)
	}
	done := (*runCtx)(c.j).Done() // the rest of that Done
	select {
	case <-done:
	default:
		t.Error("the channel Done handed out once Do had returned is open")
	}
	c.exit()
	if err := c.Err(); !errors.Is(err, context.Canceled) {
		t.Errorf("Err after that Done = %v, want context.Canceled", err)
	}
	if c.Done() != done {
		t.Error("Done returned another channel")
	}
	g := c.j.g
	g.runMu.Lock()
	n := len(g.watched)
	g.runMu.Unlock()
	if n != 0 {
		t.Errorf("%d tasks left in the group's watched set", n)
	}
}
