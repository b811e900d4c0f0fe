// Command fairshare shows fair dispatch: two tenants burst at once into an
// executor with room for 4 tasks, "gold" with share 3 and "free" with share
// 1. While both have tasks waiting, gold is served 3 permits for every one
// free is served; free is never shut out, and once gold's burst is done, free
// has all the capacity.
//
//	go run ./examples/fairshare
package main

import (
	"context"
	"fmt"
	"os"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

const (
	burst    = 600                  // tasks per tenant
	taskTime = 2 * time.Millisecond // what one task spends "working"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "fairshare:", err)
		os.Exit(1)
	}
}

func run() error {
	pol, err := policy.New(
		policy.WithGlobalMaxInFlight(4),     // the service runs at most 4 tasks
		policy.WithDefaultMaxConcurrency(4), // a tenant may use all 4
		policy.WithDefaultMaxInFlight(policy.Unlimited),
		policy.WithGroupShare("gold", 3), // "free" keeps the default share, 1
	)
	if err != nil {
		return err
	}
	ex, err := executor.New(pol)
	if err != nil {
		return err
	}
	defer ex.Close()

	var mu sync.Mutex
	var order []string // tenants in the order their tasks started
	var fair executor.Fairness
	// The tasks that start while the bursts are still being submitted hold
	// their permits until both bursts are in: from then on both tenants have
	// tasks waiting, however slowly the submitting loop ran.
	submitted := make(chan struct{})
	work := func(tenant string) func(context.Context) (struct{}, error) {
		return func(ctx context.Context) (struct{}, error) {
			mu.Lock()
			order = append(order, tenant)
			n := len(order)
			mu.Unlock()
			<-submitted
			if n == burst { // mid-burst: both tenants still have tasks waiting
				fair = ex.Stats().Fairness
			}
			time.Sleep(taskTime)
			return struct{}{}, nil
		}
	}

	ctx := context.Background()
	var hs []*executor.Handle[struct{}]
	for range burst { // both tenants burst at the same moment
		for _, tenant := range []string{"free", "gold"} {
			h, err := executor.Submit(ex, ctx, executor.Task[struct{}]{Group: tenant, Fn: work(tenant)})
			if err != nil {
				return err
			}
			hs = append(hs, h)
		}
	}
	close(submitted)
	for _, h := range hs {
		if r, _ := h.Wait(ctx); r.Status != executor.Success {
			return fmt.Errorf("task %s: %v %v", r.Group, r.Status, r.Err)
		}
	}

	// What each tenant got while both had tasks waiting: up to the start of
	// gold's last task.
	contended := map[string]int{}
	last := 0
	for i, t := range order {
		if t == "gold" {
			last = i
		}
	}
	for _, t := range order[:last+1] {
		contended[t]++
	}

	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "tenant\tshare\tstarted\tserved permits\tstarts while both waited\tof those\t")
	for _, tenant := range []string{"gold", "free"} {
		s, _ := ex.GroupStats(tenant)
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%.1f%%\t\n", tenant, s.Share, s.Started, s.ServedPermits,
			contended[tenant], 100*float64(contended[tenant])/float64(last+1))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	ratio := float64(contended["gold"]) / float64(max(contended["free"], 1))
	fmt.Printf("\nwhile both waited, gold:free = %.2f:1 (shares 3:1)\n", ratio)
	if fair.Groups > 0 { // read after Wait: the task that wrote it has completed
		fmt.Printf("Stats().Fairness mid-burst: Jain's index %.3f over %d groups, window of %d starts\n",
			fair.Index, fair.Groups, fair.Starts)
	}
	// The order of starts is the executor's choice alone (the bursts were
	// in before any permit was freed), so the split follows the shares
	// whatever the machine's speed.
	if contended["free"] == 0 {
		return fmt.Errorf("free was shut out while gold waited")
	}
	if ratio < 2.5 || ratio > 3.5 {
		return fmt.Errorf("while both waited, gold:free was %.2f:1, want about 3:1 (the shares)", ratio)
	}
	return nil
}
