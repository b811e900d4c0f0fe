package executor_test

import (
	"errors"
	"testing"

	"github.com/groupexec/groupexec/policy"
)

// An empty key names no group: no task can have it (Do, Go and Submit
// refuse it as invalid input), and SetGroupLimits and ResetGroupLimits
// refuse it. ShutdownGroup refuses it the same way, and keeps no state for
// it: a marker for "" would count among Stats' groups until evicted.
func TestShutdownGroupRefusesAnEmptyKey(t *testing.T) {
	ex := newExec(t, nil)
	err := ex.ShutdownGroup(bg, "")
	if !errors.Is(err, policy.ErrInvalidOption) {
		t.Errorf("ShutdownGroup(ctx, \"\") = %v, want an error matching policy.ErrInvalidOption", err)
	}
	if s := ex.Stats(); s.Groups != 0 {
		t.Errorf("Stats().Groups = %d after ShutdownGroup(ctx, \"\"), want 0", s.Groups)
	}
	if _, ok := ex.GroupStats(""); ok {
		t.Error(`GroupStats("") answers: ShutdownGroup made state for the empty key`)
	}
}
