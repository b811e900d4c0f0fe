package policy_test

import (
	"testing"
	"time"

	"github.com/groupexec/groupexec/policy"
)

// The package doc says an option given twice takes its later value: for the
// global options, the defaults, a group's value and a resolver alike.
func TestRepeatedOptionTakesLaterValue(t *testing.T) {
	p, err := policy.New(
		policy.WithGlobalMaxInFlight(8), policy.WithGlobalMaxInFlight(16),
		policy.WithGlobalQueueThreshold(3), policy.WithGlobalQueueThreshold(5),
		policy.WithQueueTimeout(time.Second), policy.WithQueueTimeout(2*time.Second),
		policy.WithRejectionPolicy(policy.Discard), policy.WithRejectionPolicy(policy.CallerRuns),
		policy.WithDefaultMaxInFlight(10), policy.WithDefaultMaxInFlight(20),
		policy.WithDefaultMaxConcurrency(2), policy.WithDefaultMaxConcurrency(4),
		policy.WithDefaultQueueThreshold(6), policy.WithDefaultQueueThreshold(7),
		policy.WithDefaultShare(2), policy.WithDefaultShare(3),
		policy.WithGroupMaxInFlight("a", 30), policy.WithGroupMaxInFlight("a", 40),
		policy.WithGroupMaxConcurrency("a", 5), policy.WithGroupMaxConcurrency("a", 6),
		policy.WithGroupQueueThreshold("a", 8), policy.WithGroupQueueThreshold("a", 9),
		policy.WithGroupShare("a", 4), policy.WithGroupShare("a", 5),
		policy.WithMaxConcurrencyResolver(func(string) (int, bool) { return 11, true }),
		policy.WithMaxConcurrencyResolver(func(string) (int, bool) { return 12, true }),
	)
	if err != nil {
		t.Fatal(err)
	}
	if got := p.GlobalMaxInFlight(); got != 16 {
		t.Errorf("GlobalMaxInFlight = %d, want 16", got)
	}
	if got := p.GlobalQueueThreshold(); got != 5 {
		t.Errorf("GlobalQueueThreshold = %d, want 5", got)
	}
	if got := p.QueueTimeout(); got != 2*time.Second {
		t.Errorf("QueueTimeout = %v, want 2s", got)
	}
	if got := p.RejectionPolicy(); got != policy.CallerRuns {
		t.Errorf("RejectionPolicy = %v, want CallerRuns", got)
	}
	a, err := p.Group("a")
	if err != nil {
		t.Fatal(err)
	}
	if want := (policy.GroupLimits{MaxInFlight: 40, MaxConcurrency: 6, QueueThreshold: 9, Share: 5}); a != want {
		t.Errorf("Group(a) = %+v, want %+v", a, want)
	}
	b, err := p.Group("b")
	if err != nil {
		t.Fatal(err)
	}
	if want := (policy.GroupLimits{MaxInFlight: 20, MaxConcurrency: 12, QueueThreshold: 7, Share: 3}); b != want {
		t.Errorf("Group(b) = %+v, want %+v", b, want)
	}
}
