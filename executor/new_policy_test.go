package executor_test

import (
	"strings"
	"testing"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/policy"
)

// A zero policy.Policy, which its documentation says is not usable, has
// every limit 0: an executor built on it would refuse every task as too
// heavy for a limit of 0, naming a weight and a limit the caller never
// gave. New refuses it, saying how to build one, as it refuses a nil one.
func TestNewRefusesAZeroPolicy(t *testing.T) {
	for _, p := range []*policy.Policy{nil, {}, new(policy.Policy)} {
		ex, err := executor.New(p)
		if err == nil {
			ex.Close()
			t.Errorf("New(%v) succeeded", p)
			continue
		}
		if ex != nil || !strings.Contains(err.Error(), "policy.New") {
			t.Errorf("New(%v) = %v, %q; want nil and an error saying to build the policy with policy.New", p, ex, err)
		}
	}
}
