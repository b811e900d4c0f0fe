package executor_test

import (
	"errors"
	"testing"

	"github.com/groupexec/groupexec/executor"
)

// A DoWeighted call refused for invalid input names one weight in its
// error and its event, as Submit and Go do: 0 reads 1 (DoWeighted's 0
// means 1), and a negative weight is told as given.
func TestDoWeightedInvalidReportsOneWeight(t *testing.T) {
	for _, tc := range []struct{ weight, want int }{{0, 1}, {-2, -2}} {
		var got []executor.Event
		ex := newExec(t, nil, executor.WithListener(executor.ListenerFuncs{Rejected: func(e executor.Event) { got = append(got, e) }}))
		err := ex.DoWeighted(bg, "a", tc.weight, nil)
		var re *executor.RejectedError
		if !errors.As(err, &re) || !errors.Is(err, executor.ErrInvalidTask) {
			t.Fatalf("DoWeighted(%d, nil): %v, want a *RejectedError matching ErrInvalidTask", tc.weight, err)
		}
		if len(got) != 1 {
			t.Fatalf("DoWeighted(%d, nil): %d OnRejected events, want 1", tc.weight, len(got))
		}
		if re.Weight != tc.want || got[0].Weight != tc.want {
			t.Errorf("DoWeighted(%d, nil): RejectedError.Weight %d, Event.Weight %d; want both %d", tc.weight, re.Weight, got[0].Weight, tc.want)
		}
	}
}
