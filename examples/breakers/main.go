// Command breakers shows per-tenant circuit breakers inside the grouped
// executor: one tenant's backend fails, its breaker opens and its tasks are
// refused at once (no queueing, no capacity taken), while the other tenants
// are served as before; when the backend heals, a probe closes the breaker.
//
//	go run ./examples/breakers
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/groupexec/groupexec/breaker"
	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

func main() {
	p, err := policy.New(
		policy.WithGlobalMaxInFlight(16),
		policy.WithDefaultMaxConcurrency(4),
		policy.WithDefaultMaxInFlight(32),
	)
	if err != nil {
		fail(err)
	}
	ex, err := executor.New(p, executor.WithGroupBreaker(breaker.Settings{
		Timeout: 300 * time.Millisecond, // open for 300ms, then one probe
		OnStateChange: func(name string, from, to breaker.State) {
			fmt.Printf("  breaker %-6s %s -> %s\n", name, from, to)
		},
	}))
	if err != nil {
		fail(err)
	}
	defer ex.Close()

	var acmeDown atomic.Bool
	call := func(tenant string) func(context.Context) (string, error) {
		return func(ctx context.Context) (string, error) {
			time.Sleep(2 * time.Millisecond) // the backend call
			if tenant == "acme" && acmeDown.Load() {
				return "", errors.New("acme backend: 503")
			}
			return "ok", nil
		}
	}
	round := func(label string) {
		tally := map[string]map[string]int{}
		var hs []*executor.Handle[string]
		for i := range 20 {
			for _, tenant := range []string{"acme", "globex", "initech"} {
				h, _ := executor.Submit(ex, context.Background(), executor.Task[string]{
					Group: tenant, ID: fmt.Sprint(tenant, "-", i), Fn: call(tenant)})
				hs = append(hs, h)
			}
		}
		for _, h := range hs {
			r, _ := h.Wait(context.Background())
			kind := r.Status.String()
			if errors.Is(r.Err, breaker.ErrOpenState) || errors.Is(r.Err, breaker.ErrTooManyRequests) {
				kind = "Refused by breaker"
			}
			if tally[r.Group] == nil {
				tally[r.Group] = map[string]int{}
			}
			tally[r.Group][kind]++
		}
		fmt.Printf("%s\n", label)
		for _, tenant := range []string{"acme", "globex", "initech"} {
			s, _ := ex.GroupStats(tenant)
			fmt.Printf("  %-8s breaker %-9s %v\n", tenant, s.Breaker, tally[tenant])
		}
	}

	round("1. all backends healthy")
	acmeDown.Store(true)
	round("2. acme's backend fails: all 20 were admitted before the 5th failure opened the breaker")
	round("3. acme's breaker is open: its tasks are refused at once, the others unaffected")
	acmeDown.Store(false)
	time.Sleep(350 * time.Millisecond)
	round("4. acme healed, timeout passed: one probe is let through and closes the breaker;\n   the tasks submitted while it was half-open were refused")

	s, _ := ex.GroupStats("acme")
	if s.Breaker != breaker.StateClosed {
		fail(fmt.Errorf("acme's breaker is %v at the end, want closed", s.Breaker))
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "breakers:", err)
	os.Exit(1)
}
