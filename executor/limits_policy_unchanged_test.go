package executor_test

import (
	"context"
	"testing"

	"github.com/groupexec/groupexec/policy"
)

// Limits changed at runtime are the executor's: Stats and GroupStats report
// them, while Policy() still gives the policy the executor was made with,
// as the README says.
func TestRuntimeLimitsLeaveThePolicyUnchanged(t *testing.T) {
	ex := newExec(t, []policy.Option{policy.WithGlobalMaxInFlight(4), policy.WithGroupMaxConcurrency("g", 2)})
	if err := ex.SetGlobalMaxInFlight(9); err != nil {
		t.Fatal(err)
	}
	set := limits(7, 3, 5, 2)
	if err := ex.SetGroupLimits("g", set); err != nil {
		t.Fatal(err)
	}
	if err := ex.Do(context.Background(), "g", func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}

	if got := ex.Stats().GlobalMaxInFlight; got != 9 {
		t.Errorf("Stats().GlobalMaxInFlight = %d, want 9", got)
	}
	s := groupStats(t, ex, "g")
	if got := limits(s.MaxInFlight, s.MaxConcurrency, s.QueueThreshold, s.Share); got != set {
		t.Errorf("GroupStats limits %+v, want %+v", got, set)
	}
	if got := ex.Policy().GlobalMaxInFlight(); got != 4 {
		t.Errorf("Policy().GlobalMaxInFlight() = %d, want 4", got)
	}
	got, err := ex.Policy().Group("g")
	if err != nil {
		t.Fatal(err)
	}
	if want := limits(policy.DefaultMaxInFlight, 2, policy.Unlimited, policy.DefaultShare); got != want {
		t.Errorf("Policy().Group(g) = %+v, want the policy's %+v", got, want)
	}
}
