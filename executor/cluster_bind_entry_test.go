package executor_test

import (
	"context"
	"errors"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

// A cluster permit's Bind that panics fails the task without running its
// function, from Do (which returns the *PanicError) and from Go (counted
// Failed), as from Submit; one that exits the goroutine ends a Go task's
// worker the same way. Either way the local and cluster permits come back,
// including those of a task that waited for the limiter's notify, and the
// group serves again.
func TestClusterBindPanicOrGoexitFromDoAndGo(t *testing.T) {
	for _, tc := range []struct {
		name  string
		bind  func()
		entry string
	}{
		{"Do/panic", func() { panic("bind boom") }, "Do"},
		{"Go/panic", func() { panic("bind boom") }, "Go"},
		{"Go/goexit", runtime.Goexit, "Go"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			glob, grp := newMemLimiter(), newMemLimiter()
			glob.avail[""] = 2
			ex := newExec(t, []policy.Option{policy.WithDefaultMaxConcurrency(2)},
				executor.WithGlobalLimiter(glob), executor.WithGroupLimiter(grp))
			grp.onBind = tc.bind
			var ran atomic.Int32
			fn := func(context.Context) error { ran.Add(1); return nil }
			// Two tasks wait for the group limiter, which then has a
			// permit for one at a time.
			doErr := make(chan error, 2)
			for range 2 {
				if tc.entry == "Go" {
					if err := ex.Go(bg, "a", fn); err != nil {
						t.Fatal(err)
					}
					continue
				}
				go func() { doErr <- ex.Do(bg, "a", fn) }()
			}
			await(t, "two tasks waiting for the limiter", func() bool { s, ok := ex.GroupStats("a"); return ok && s.Waiting == 2 })
			grp.give("a", 1)
			await(t, "both tasks failed", func() bool { return groupStats(t, ex, "a").Failed == 2 })
			if tc.entry == "Do" {
				for range 2 {
					var pe *executor.PanicError
					if err := recv(t, doErr, "a Do call whose Bind panicked"); !errors.As(err, &pe) || pe.Value != "bind boom" {
						t.Fatalf("Do: %v, want the Bind's panic", err)
					}
				}
			}
			if n := ran.Load(); n != 0 {
				t.Fatalf("%d functions ran, their Bind having failed", n)
			}
			if a, b := glob.outstanding(), grp.outstanding(); a != 0 || b != 0 {
				t.Fatalf("cluster permits out: global %d, group %d", a, b)
			}
			grp.onBind = nil // every Bind has returned: the tasks completed
			wantServes(t, ex, "a", "two tasks whose Bind failed")
			if s := groupStats(t, ex, "a"); s.Submitted != 3 || s.Failed != 2 || s.Succeeded != 1 || s.InFlight != 0 {
				t.Fatalf("group a: %+v", s)
			}
		})
	}
}
