package executor_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

// TestHeadMadeTooHeavyAfterLoweringDoesNotHoldOtherGroups: a task that
// fitted the global limit when it was admitted, queued behind a lighter
// one, becomes its group's head only after the limit was lowered under its
// weight. It waits, holding its group's queue, but other groups' tasks
// waiting for global room start: the lowered limit delays no other group,
// whichever of the dispatcher or a finish in its group made it the head.
func TestHeadMadeTooHeavyAfterLoweringDoesNotHoldOtherGroups(t *testing.T) {
	for _, share := range []int{1, 3} {
		for _, conc := range []int{3, 5} { // 3: held by its own limit too while light runs
			t.Run(fmt.Sprintf("share%d/conc%d", share, conc), func(t *testing.T) {
				ex := newExec(t, []policy.Option{
					policy.WithGlobalMaxInFlight(3),
					policy.WithDefaultMaxConcurrency(5),
					policy.WithGroupMaxConcurrency("g", conc),
					policy.WithGroupShare("g", share),
				})
				c := newCrew()
				holder := c.submit(t, ex, "holder", "holder", 3)
				c.waitStarted(t, 1)
				light := c.submit(t, ex, "g", "light", 1)
				heavy := c.submit(t, ex, "g", "heavy", 3) // fits the limit of 3 now
				others := []*executor.Handle[string]{c.submit(t, ex, "x", "x1", 1), c.submit(t, ex, "y", "y1", 1)}
				checkUse(t, ex, 3, 4)

				if err := ex.SetGlobalMaxInFlight(2); err != nil {
					t.Fatal(err)
				}
				c.finish(t, holder)
				// light starts, then heavy is g's head: 3 > 2, it waits;
				// x1 or y1 takes the room left.
				got := c.waitStarted(t, 2)
				if got[0] != "light" && got[1] != "light" {
					t.Fatalf("started %v, want light among them", got)
				}
				c.finish(t, light) // a finish in g, with heavy its head
				// The other of x1 and y1 must start now: room is 1 of 2 used.
				c.waitStarted(t, 1)
				for _, h := range others {
					c.finish(t, h)
				}
				if isDone(heavy) {
					t.Fatal("heavy completed while heavier than the limit")
				}
				if err := ex.SetGlobalMaxInFlight(3); err != nil {
					t.Fatal(err)
				}
				if s := c.waitStarted(t, 1); s[0] != "heavy" {
					t.Fatalf("started %v, want heavy", s)
				}
				c.finish(t, heavy)
				checkUse(t, ex, 0, 0)
			})
		}
	}
}

// TestHeadMadeTooHeavyByACancelDoesNotHoldOtherGroups: as above, but the
// task before the heavy one leaves the queue by a cancel, or the queue
// timeout, instead of starting, with the dispatcher's turn possibly on its
// group: the heavy head waits, and the other groups take the room.
func TestHeadMadeTooHeavyByACancelDoesNotHoldOtherGroups(t *testing.T) {
	for _, share := range []int{1, 3} {
		for _, byTimeout := range []bool{false, true} {
			t.Run(fmt.Sprintf("share%d/timeout=%v", share, byTimeout), func(t *testing.T) {
				clk := fakeClock()
				popts := []policy.Option{
					policy.WithGlobalMaxInFlight(3),
					policy.WithDefaultMaxConcurrency(3),
					policy.WithGroupShare("g", share),
				}
				if byTimeout {
					popts = append(popts, policy.WithQueueTimeout(10*time.Second))
				}
				ex := newExec(t, popts, executor.WithClock(clk))
				c := newCrew()
				holder := c.submit(t, ex, "holder", "holder", 2)
				c.waitStarted(t, 1)
				first := c.submit(t, ex, "g", "first", 2) // 2+2 > 3: waits, g's turn begins
				clk.Advance(5 * time.Second)
				heavy := c.submit(t, ex, "g", "heavy", 3)
				x := c.submit(t, ex, "x", "x1", 1)
				if err := ex.SetGlobalMaxInFlight(2); err != nil {
					t.Fatal(err)
				}
				if byTimeout {
					clk.Advance(5 * time.Second) // first's deadline only
				} else if !first.Cancel() {
					t.Fatal("Cancel of a waiting task reported false")
				}
				if r := wait(t, first); r.Status == executor.Success {
					t.Fatalf("first ran: %+v", r)
				}
				c.finish(t, holder)
				if s := c.waitStarted(t, 1); s[0] != "x1" {
					t.Fatalf("started %v, want x1", s)
				}
				c.finish(t, x)
				if isDone(heavy) {
					t.Fatal("heavy completed while heavier than the limit")
				}
				if err := ex.SetGlobalMaxInFlight(3); err != nil {
					t.Fatal(err)
				}
				c.waitStarted(t, 1)
				c.finish(t, heavy)
				checkUse(t, ex, 0, 0)
			})
		}
	}
}
