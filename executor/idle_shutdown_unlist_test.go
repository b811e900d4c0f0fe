package executor_test

import (
	"testing"

	"github.com/groupexec/groupexec/executor"
)

// A group shut down with ShutdownGroup is kept until evicted, and never
// reclaimed: shut down while listed idle, it leaves the idle list, or it
// would count toward WithMaxIdleGroups until trimmed off and have an idle
// group reclaimed in its place.
func TestGroupShutDownWhileListedIdleLeavesTheList(t *testing.T) {
	ex := newExec(t, nil, executor.WithMaxIdleGroups(2))
	use := func(group string) { t.Helper(); wait(t, submit(t, ex, executor.Task[int]{Group: group, Fn: succeed})) }
	kept := func(group string) bool { _, ok := ex.GroupStats(group); return ok }
	// More groups than 2 first, so that the list is in use: each group
	// after these is listed as it goes idle, and the list ends [a s].
	for _, group := range []string{"e0", "e1", "e2", "a", "s"} {
		use(group)
	}
	if !kept("a") || !kept("s") {
		t.Fatalf("kept a %v, s %v: want both, the two most recently idle", kept("a"), kept("s"))
	}
	if err := ex.ShutdownGroup(bg, "s"); err != nil {
		t.Fatal(err)
	}
	use("b")
	if !kept("a") || !kept("b") || !kept("s") {
		t.Fatalf("kept a %v, b %v, s (shut down) %v: want all three, a and b the only idle groups that may be reclaimed", kept("a"), kept("b"), kept("s"))
	}
}
