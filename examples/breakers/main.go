// Command breakers shows per-tenant circuit breakers inside the grouped
// executor: one tenant's backend fails, its breaker opens and its tasks are
// refused (at once, or as they would start if they were queued: no
// capacity taken), while the other tenants
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
	"github.com/groupexec/groupexec/clock"
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
	// The breakers read a clock that moves only when told to: the open
	// timeout passes between rounds 3 and 4 and never mid-round, however
	// slowly the machine runs the rounds.
	brClock := clock.NewFake(time.Now())
	const openFor = 300 * time.Millisecond
	ex, err := executor.New(p, executor.WithGroupBreaker(breaker.Settings{
		Timeout: openFor, // open for 300ms, then one probe
		Clock:   brClock,
		OnStateChange: func(name string, from, to breaker.State) {
			fmt.Printf("  breaker %-6s %s -> %s\n", name, from, to)
		},
	}))
	if err != nil {
		fail(err)
	}
	defer ex.Close()

	var acmeDown atomic.Bool
	// Every call of a round waits for the round's last submission
	// (submitted): a round's tasks are all admitted before any ends, and
	// so before any failure counts, however slowly the machine submits.
	call := func(tenant string, submitted <-chan struct{}) func(context.Context) (string, error) {
		return func(ctx context.Context) (string, error) {
			<-submitted
			time.Sleep(2 * time.Millisecond) // the backend call
			if tenant == "acme" && acmeDown.Load() {
				return "", errors.New("acme backend: 503")
			}
			return "ok", nil
		}
	}
	round := func(label string) map[string]map[string]int {
		tally := map[string]map[string]int{}
		var hs []*executor.Handle[string]
		submitted := make(chan struct{})
		for i := range 20 {
			for _, tenant := range []string{"acme", "globex", "initech"} {
				h, _ := executor.Submit(ex, context.Background(), executor.Task[string]{
					Group: tenant, ID: fmt.Sprint(tenant, "-", i), Fn: call(tenant, submitted)})
				hs = append(hs, h)
			}
		}
		close(submitted)
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
		// The healthy tenants are served in full whatever acme's backend does.
		for _, tenant := range []string{"globex", "initech"} {
			if n := tally[tenant]["Success"]; n != 20 {
				fail(fmt.Errorf("%s: %d of 20 tasks succeeded, want all: %v", tenant, n, tally[tenant]))
			}
		}
		return tally
	}
	breakerOf := func(tenant string) breaker.State {
		s, _ := ex.GroupStats(tenant)
		return s.Breaker
	}

	round("1. all backends healthy")
	acmeDown.Store(true)
	acme := round("2. acme's backend fails: the 5th failure opens the breaker; the tasks still queued\n   are refused as they would start, those running beside it (at most 3) fail")["acme"]
	if f, r := acme["Failed"], acme["Refused by breaker"]; f < 5 || f > 8 || f+r != 20 {
		fail(fmt.Errorf("acme's tasks with its backend failing: %v, want 5 to 8 failed and the rest refused by the breaker", acme))
	}
	if st := breakerOf("acme"); st != breaker.StateOpen {
		fail(fmt.Errorf("acme's breaker is %v after its backend failed, want open", st))
	}
	acme = round("3. acme's breaker is open: its tasks are refused at once, the others unaffected")["acme"]
	if acme["Refused by breaker"] != 20 {
		fail(fmt.Errorf("acme's tasks with its breaker open: %v, want them refused by the breaker", acme))
	}
	acmeDown.Store(false)
	brClock.Advance(openFor)
	acme = round("4. acme healed, timeout passed: one probe is let through and closes the breaker;\n   the tasks submitted while it was half-open were refused")["acme"]
	if acme["Success"] != 1 || acme["Refused by breaker"] != 19 {
		fail(fmt.Errorf("acme's tasks after it healed: %v, want the probe to succeed and the 19 others refused", acme))
	}
	if st := breakerOf("acme"); st != breaker.StateClosed {
		fail(fmt.Errorf("acme's breaker is %v at the end, want closed", st))
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "breakers:", err)
	os.Exit(1)
}
