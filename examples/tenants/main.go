// Command tenants is a multi-tenant burst through one executor. One tenant
// floods the executor with 500 tasks while four light tenants submit a
// handful each. The flood fills its own bulkhead and is rejected there,
// fast; every light task is served within a few task-times.
//
//	go run ./examples/tenants
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

const taskTime = 5 * time.Millisecond // what one task spends "working"

// tally is what the listener saw of one group.
type tally struct {
	submitted, refused, timedOut, started, ran int
	wait, maxWait                              time.Duration
}

// tallies is a Listener's memory, one tally per group, all made up front.
// Listener calls may run concurrently, so it locks.
type tallies struct {
	mu sync.Mutex
	by map[string]*tally
}

func (t *tallies) update(group string, f func(*tally)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	f(t.by[group])
}

func (t *tallies) listener() executor.Listener {
	return executor.ListenerFuncs{
		Submitted: func(e executor.Event) { t.update(e.Group, func(c *tally) { c.submitted++ }) },
		Rejected: func(e executor.Event) {
			t.update(e.Group, func(c *tally) {
				if errors.Is(e.Err, executor.ErrQueueTimeout) {
					c.timedOut++ // admitted, but waited too long and never ran
				} else {
					c.refused++ // refused at the door: Submit returned the error
				}
			})
		},
		Started: func(e executor.Event) {
			t.update(e.Group, func(c *tally) {
				c.started++
				c.wait += e.Queued
				c.maxWait = max(c.maxWait, e.Queued)
			})
		},
		Completed: func(e executor.Event) {
			if e.Status == executor.Success {
				t.update(e.Group, func(c *tally) { c.ran++ })
			}
		},
	}
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "tenants:", err)
		os.Exit(1)
	}
}

func run() error {
	// A light tenant's 6 tasks wait 3 task times and some global room, a
	// wait a loaded machine stretches past a queue timeout of a few task
	// times (40ms was): the timeout is far past it, and the flood is cut
	// back at the door by its bulkhead.
	pol, err := policy.New(
		policy.WithGlobalMaxInFlight(8),        // the whole service runs at most 8 tasks
		policy.WithDefaultMaxConcurrency(2),    // a tenant runs at most 2
		policy.WithDefaultMaxInFlight(20),      // and holds at most 20 admitted (its bulkhead)
		policy.WithQueueTimeout(2*time.Second), // no light task waits that long
		policy.WithRejectionPolicy(policy.Abort),
	)
	if err != nil {
		return err
	}
	groups := []string{"flood", "alpha", "bravo", "charlie", "delta"}
	seen := &tallies{by: map[string]*tally{}}
	for _, g := range groups {
		seen.by[g] = &tally{}
	}
	ex, err := executor.New(pol, executor.WithListener(seen.listener()))
	if err != nil {
		return err
	}
	defer ex.Close()
	fmt.Println(pol)

	work := func(ctx context.Context) (struct{}, error) {
		select {
		case <-time.After(taskTime):
			return struct{}{}, nil
		case <-ctx.Done():
			return struct{}{}, context.Cause(ctx)
		}
	}

	// submit sends n tasks for group, one every gap, after a pause, then
	// waits for their handles: each completes once, after its listener calls.
	var wg sync.WaitGroup
	submit := func(group string, n int, pause, gap time.Duration) {
		defer wg.Done()
		time.Sleep(pause)
		handles := make([]*executor.Handle[struct{}], n)
		for i := range n {
			// Under Abort a refused task's error comes back here at once, and
			// its handle is completed Rejected.
			handles[i], _ = executor.Submit(ex, context.Background(), executor.Task[struct{}]{Group: group, Fn: work})
			time.Sleep(gap)
		}
		for _, h := range handles {
			<-h.Done()
		}
	}

	start := time.Now()
	wg.Add(len(groups))
	// The flood offers a task about every half millisecond; its 2 slots
	// drain one every 2.5 ms.
	go submit("flood", 500, 0, 500*time.Microsecond)
	// Mid-flood, the light tenants each burst 6 tasks at once: with the
	// flood they want 10 slots of the 8, so they also queue for global room.
	for _, light := range groups[1:] {
		go submit(light, 6, 100*time.Millisecond, 0)
	}
	wg.Wait()
	elapsed := time.Since(start)

	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "group\tsubmitted\tadmitted\trejected\ttimed out\tran\tavg wait\tmax wait\t")
	for _, g := range groups {
		c := seen.by[g]
		avg := time.Duration(0)
		if c.started > 0 {
			avg = c.wait / time.Duration(c.started)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%v\t%v\t\n", g, c.submitted, c.submitted-c.refused,
			c.refused, c.timedOut, c.ran, avg.Round(time.Millisecond), c.maxWait.Round(time.Millisecond))
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	st := ex.Stats()
	fmt.Printf("global: %d submitted, %d started, %d succeeded, %d rejected, %d cancelled; %d groups kept; %v\n",
		st.Submitted, st.Started, st.Succeeded, st.Rejected, st.Cancelled, st.Groups, elapsed.Round(time.Millisecond))

	// The light tenants must have been served in full, the flood cut back.
	for _, g := range groups[1:] {
		if gs, ok := ex.GroupStats(g); !ok || gs.Succeeded != 6 {
			return fmt.Errorf("light tenant %s was not fully served: %+v", g, gs)
		}
	}
	if seen.by["flood"].refused == 0 {
		return errors.New("the flood was never rejected")
	}
	return nil
}
