package policy

import "fmt"

// RejectionPolicy says what the executor does with a task that is refused
// because a limit or queue threshold has no room for it.
type RejectionPolicy int

const (
	// Abort completes the task's handle Rejected and makes Submit return the
	// rejection error. It is the default.
	Abort RejectionPolicy = iota
	// Discard completes the task's handle Rejected; Submit returns no error.
	Discard
	// CallerRuns runs the task in the submitting goroutine, outside every
	// limit, and Submit returns when it is done. It slows the submitter down
	// to the pace the executor can absorb.
	CallerRuns
)

func (r RejectionPolicy) String() string {
	switch r {
	case Abort:
		return "Abort"
	case Discard:
		return "Discard"
	case CallerRuns:
		return "CallerRuns"
	}
	return fmt.Sprintf("RejectionPolicy(%d)", int(r))
}

func (r RejectionPolicy) valid() bool { return r >= Abort && r <= CallerRuns }
