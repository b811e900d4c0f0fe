package executor_test

import (
	"errors"
	"testing"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

// A concurrency limit above the group's in-flight limit is accepted, from
// the default, a per-group value, a resolver or SetGroupLimits, as the
// policy's options say: running tasks are admitted ones, so the group runs
// its in-flight limit's permits and refuses the next task by that limit,
// while GroupStats reports MaxConcurrency as set.
func TestConcurrencyAboveInFlightRunsTheInFlightLimit(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []policy.Option
		set  bool // the limits come from SetGroupLimits
	}{
		{"default", []policy.Option{policy.WithDefaultMaxConcurrency(5)}, false},
		{"per-group", []policy.Option{policy.WithGroupMaxConcurrency("g", 5)}, false},
		{"resolver", []policy.Option{policy.WithMaxConcurrencyResolver(func(string) (int, bool) { return 5, true })}, false},
		{"SetGroupLimits", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ex := newExec(t, append([]policy.Option{policy.WithDefaultMaxInFlight(2)}, tc.opts...))
			if tc.set {
				l := policy.GroupLimits{MaxInFlight: 2, MaxConcurrency: 5, QueueThreshold: policy.Unlimited, Share: 1}
				if err := ex.SetGroupLimits("g", l); err != nil {
					t.Fatal(err)
				}
			}
			g := newGate()
			defer g.open()
			submit(t, ex, executor.Task[string]{Group: "g", Fn: g.fn("a")})
			submit(t, ex, executor.Task[string]{Group: "g", Fn: g.fn("b")})
			g.waitStarted(t, 2)
			_, err := executor.Submit(ex, bg, executor.Task[string]{Group: "g", Fn: g.fn("c")})
			var rej *executor.RejectedError
			if !errors.As(err, &rej) || rej.Limit != executor.LimitGroupInFlight {
				t.Fatalf("third task: err %v, want a refusal by the group's in-flight limit", err)
			}
			s := groupStats(t, ex, "g")
			if s.Running != 2 || s.InFlight != 2 || s.MaxInFlight != 2 || s.MaxConcurrency != 5 {
				t.Errorf("stats: running %d, in flight %d, max in flight %d, max concurrency %d; want 2, 2, 2, 5",
					s.Running, s.InFlight, s.MaxInFlight, s.MaxConcurrency)
			}
		})
	}
}
