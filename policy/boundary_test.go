package policy_test

import (
	"math"
	"testing"
	"time"

	"github.com/groupexec/groupexec/policy"
)

// Every option takes its least valid value (1 for a limit or share, 0 for
// a queue threshold or timeout) and its greatest (Unlimited, the longest
// duration), and the policy reads them back as given: the bounds New
// checks are exactly the documented ones, at both ends.
func TestOptionsAcceptTheirBounds(t *testing.T) {
	for _, n := range []struct{ limit, threshold int }{{1, 0}, {policy.Unlimited, policy.Unlimited}} {
		timeout := time.Duration(0)
		if n.limit == policy.Unlimited {
			timeout = math.MaxInt64
		}
		p, err := policy.New(
			policy.WithGlobalMaxInFlight(n.limit),
			policy.WithGlobalQueueThreshold(n.threshold),
			policy.WithQueueTimeout(timeout),
			policy.WithDefaultMaxInFlight(n.limit),
			policy.WithDefaultMaxConcurrency(n.limit),
			policy.WithDefaultQueueThreshold(n.threshold),
			policy.WithDefaultShare(n.limit),
			policy.WithGroupMaxInFlight("g", n.limit),
			policy.WithGroupMaxConcurrency("g", n.limit),
			policy.WithGroupQueueThreshold("g", n.threshold),
			policy.WithGroupShare("g", n.limit),
		)
		if err != nil {
			t.Fatalf("limits %d, thresholds %d: %v", n.limit, n.threshold, err)
		}
		if p.GlobalMaxInFlight() != n.limit || p.GlobalQueueThreshold() != n.threshold || p.QueueTimeout() != timeout {
			t.Errorf("limits %d, thresholds %d: global %d, global queue %d, timeout %v",
				n.limit, n.threshold, p.GlobalMaxInFlight(), p.GlobalQueueThreshold(), p.QueueTimeout())
		}
		want := policy.GroupLimits{MaxInFlight: n.limit, MaxConcurrency: n.limit, QueueThreshold: n.threshold, Share: n.limit}
		for _, g := range []string{"g", "other"} { // per-group values, defaults
			if l, err := p.Group(g); err != nil || l != want {
				t.Errorf("Group(%q) = %+v, %v; want %+v", g, l, err, want)
			}
		}
	}
}
