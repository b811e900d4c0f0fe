package executor_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/groupexec/groupexec/executor"
)

// A cluster limiter's refusal has no use or maximum the executor knows:
// its message names the limiter and its error, and no "used 0 of 0",
// which would read as a limit of 0.
func TestClusterRefusalMessageClaimsNoUse(t *testing.T) {
	errDown := errors.New("cluster down")
	for _, c := range []struct {
		limit executor.Limit
		opt   func(executor.Limiter) executor.Option
	}{
		{executor.LimitClusterGlobal, executor.WithGlobalLimiter},
		{executor.LimitClusterGroup, executor.WithGroupLimiter},
	} {
		lim := newMemLimiter()
		lim.refuse = errDown
		ex := newExec(t, nil, c.opt(lim))
		_, err := executor.Submit(ex, bg, executor.Task[int]{Group: "a", Fn: succeeding})
		var rej *executor.RejectedError
		if !errors.As(err, &rej) || rej.Limit != c.limit || !errors.Is(err, errDown) {
			t.Fatalf("Submit: %v, want a refusal by %q", err, c.limit)
		}
		want := `executor: task of group "a" rejected by ` + string(c.limit) + ": cluster down"
		if msg := err.Error(); msg != want || strings.Contains(msg, "used") {
			t.Errorf("message %q, want %q", msg, want)
		}
	}
}
