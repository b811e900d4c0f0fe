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
	// DiscardOldest makes room for the task when its group's queue is full
	// (its queue threshold): the group's oldest waiting tasks, as few as make
	// room, complete Rejected at once without running, with an error
	// matching executor.ErrDisplaced, and the task waits at the tail of the
	// queue; Submit returns no error. Other groups are untouched. A queue
	// with nothing to give up (a queue threshold of 0) discards the task as
	// under Discard, as does a refusal by the group's in-flight limit or
	// the global queue threshold; a shutdown, a task too heavy and an open
	// breaker return their error under every policy. It suits
	// latency-sensitive work, where the newest request is the one still
	// worth serving.
	DiscardOldest
)

// String returns the policy's name ("Abort", "DiscardOldest"), or
// RejectionPolicy(n) for a value that names none.
func (r RejectionPolicy) String() string {
	switch r {
	case Abort:
		return "Abort"
	case Discard:
		return "Discard"
	case CallerRuns:
		return "CallerRuns"
	case DiscardOldest:
		return "DiscardOldest"
	}
	return fmt.Sprintf("RejectionPolicy(%d)", int(r))
}

func (r RejectionPolicy) valid() bool { return r >= Abort && r <= DiscardOldest }
