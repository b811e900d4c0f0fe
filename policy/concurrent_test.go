package policy_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/groupexec/groupexec/policy"
)

// A Policy is safe for concurrent use: the executor resolves groups from
// many goroutines at once (run with -race), and each gets the limits its
// group resolves to.
func TestPolicyConcurrentUse(t *testing.T) {
	p, err := policy.New(
		policy.WithGroupMaxConcurrency("vip", 8),
		policy.WithMaxInFlightResolver(func(g string) (int, bool) { return len(g), len(g) > 1 }),
	)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 200 {
				g := fmt.Sprintf("g%d-%d", w, i)
				l, err := p.Group(g)
				if err != nil || l.MaxInFlight != len(g) || l.MaxConcurrency != policy.DefaultMaxConcurrency {
					t.Errorf("Group(%q) = %+v, %v", g, l, err)
					return
				}
				if l, _ := p.Group("vip"); l.MaxConcurrency != 8 {
					t.Errorf("Group(vip) = %+v", l)
					return
				}
				_ = p.String()
			}
		})
	}
	wg.Wait()
}
