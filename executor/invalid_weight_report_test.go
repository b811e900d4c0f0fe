package executor_test

import (
	"errors"
	"testing"

	"github.com/groupexec/groupexec/executor"
)

// A task refused for invalid input is told to the listener with the
// weight its RejectedError names: Weight 0 reads 1, as for every task
// (Event.Weight), and a negative weight, the invalid input itself, as
// given, so that a log of the event says what was wrong.
func TestInvalidSubmitReportsOneWeight(t *testing.T) {
	var got []executor.Event
	ex := newExec(t, nil, executor.WithListener(executor.ListenerFuncs{Rejected: func(e executor.Event) { got = append(got, e) }}))
	for _, tc := range []struct {
		weight, want int
	}{{0, 1}, {3, 3}, {-2, -2}} {
		got = nil
		_, err := executor.Submit(ex, bg, executor.Task[int]{Group: "a", Weight: tc.weight}) // nil Fn, or a negative weight
		var re *executor.RejectedError
		if !errors.As(err, &re) || !errors.Is(err, executor.ErrInvalidTask) {
			t.Fatalf("Submit(Weight %d, nil Fn): %v, want a *RejectedError matching ErrInvalidTask", tc.weight, err)
		}
		if len(got) != 1 {
			t.Fatalf("Submit(Weight %d, nil Fn): %d OnRejected events, want 1", tc.weight, len(got))
		}
		if re.Weight != tc.want || got[0].Weight != tc.want {
			t.Errorf("Submit(Weight %d, nil Fn): RejectedError.Weight %d, Event.Weight %d; want both %d",
				tc.weight, re.Weight, got[0].Weight, tc.want)
		}
	}
}
