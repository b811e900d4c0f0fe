package benchmarks

import (
	"testing"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

// The grouped workload (grouped_test.go) with unequal shares: group i gets
// share 1 + i%4, given through policy.WithShareResolver, so deficit round
// robin gives different groups different numbers of starts per turn.
// Grouped/ours is the same workload with every share at the default (1).

func newOursShares(c *counter) (runner, error) {
	r, err := newOurs(c, groupedKeys, groupedGlobal, groupedConc, 0)
	if err != nil {
		return nil, err
	}
	r.ex.Close()
	shareOf := make(map[string]int, len(groupedKeys))
	for i, k := range groupedKeys {
		shareOf[k] = 1 + i%4
	}
	p, err := policy.New(
		policy.WithGlobalMaxInFlight(groupedGlobal),
		policy.WithDefaultMaxConcurrency(groupedConc),
		policy.WithDefaultMaxInFlight(policy.Unlimited),
		policy.WithShareResolver(func(g string) (int, bool) { n, ok := shareOf[g]; return n, ok }),
	)
	if err != nil {
		return nil, err
	}
	if r.ex, err = executor.New(p); err != nil {
		return nil, err
	}
	return r, nil
}

func BenchmarkGroupedShares(b *testing.B) {
	benchRunner(b, peerCase{"ours-shares", newOursShares})
}

func TestGroupedSharesRunner(t *testing.T) {
	testRunners(t, []peerCase{{"ours-shares", newOursShares}}, groupedGlobal)
}
