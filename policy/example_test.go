package policy_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/groupexec/groupexec/policy"
)

func ExampleNew() {
	p, err := policy.New(
		policy.WithGlobalMaxInFlight(256),      // permits running, all groups
		policy.WithDefaultMaxInFlight(64),      // each group's bulkhead: admitted, waiting + running
		policy.WithDefaultMaxConcurrency(4),    // permits running per group
		policy.WithQueueTimeout(2*time.Second), // longest wait before a task starts
		policy.WithGroupMaxConcurrency("batch", 1),
	)
	if err != nil {
		panic(err)
	}
	fmt.Println(p)

	// Per-group overrides win over the defaults.
	for _, g := range []string{"tenant-a", "batch"} {
		l, _ := p.Group(g)
		fmt.Printf("%s: in flight %d, concurrency %d, queue unlimited %t, share %d\n",
			g, l.MaxInFlight, l.MaxConcurrency, l.QueueThreshold == policy.Unlimited, l.Share)
	}
	// Output:
	// policy{global=256 groupInFlight=64 groupConcurrency=4 groupQueue=unlimited globalQueue=unlimited share=1 timeout=2s rejection=Abort overrides=1}
	// tenant-a: in flight 64, concurrency 4, queue unlimited true, share 1
	// batch: in flight 64, concurrency 1, queue unlimited true, share 1
}

// With no options, New gives the documented defaults.
func ExampleNew_defaults() {
	p, _ := policy.New()
	fmt.Println(p)
	// Output:
	// policy{global=unlimited groupInFlight=1024 groupConcurrency=1 groupQueue=unlimited globalQueue=unlimited share=1 timeout=0s rejection=Abort overrides=0}
}

// New validates every option once and names the first invalid one.
func ExampleOptionError() {
	_, err := policy.New(
		policy.WithGlobalMaxInFlight(8),
		policy.WithDefaultMaxConcurrency(0),
	)
	fmt.Println(err)
	fmt.Println(errors.Is(err, policy.ErrInvalidOption))

	var oe *policy.OptionError
	if errors.As(err, &oe) {
		fmt.Println(oe.Option, oe.Value)
	}
	// Output:
	// policy: WithDefaultMaxConcurrency(0): a limit must be >= 1 (policy.Unlimited for none)
	// true
	// WithDefaultMaxConcurrency 0
}

// A concurrency resolver sizes groups that have no per-group value, once,
// when the executor first sees them.
func ExampleWithMaxConcurrencyResolver() {
	p, _ := policy.New(policy.WithMaxConcurrencyResolver(func(group string) (int, bool) {
		if group == "premium" {
			return 8, true
		}
		return 0, false // the default
	}))
	for _, g := range []string{"premium", "free"} {
		l, _ := p.Group(g)
		fmt.Println(g, l.MaxConcurrency)
	}
	// Output:
	// premium 8
	// free 1
}

// Shares divide global capacity among the groups waiting for it; they can
// come from per-group options or from configuration through a resolver.
func ExampleWithGroupShare() {
	plans := map[string]int{"gold": 4, "silver": 2} // e.g. loaded from a file
	p, _ := policy.New(
		policy.WithGroupShare("internal", 8),
		policy.WithShareResolver(func(group string) (int, bool) {
			n, ok := plans[group]
			return n, ok
		}),
	)
	for _, g := range []string{"internal", "gold", "silver", "free"} {
		l, _ := p.Group(g)
		fmt.Println(g, l.Share)
	}
	// Output:
	// internal 8
	// gold 4
	// silver 2
	// free 1
}
