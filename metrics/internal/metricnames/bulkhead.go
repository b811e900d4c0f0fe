package metricnames

import (
	"context"

	"github.com/groupexec/groupexec/bulkhead"
)

// A bulkhead's metrics, each with the label bulkhead; the rejections with
// the label code too.
var (
	BulkheadInFlight   = Metric{"bulkhead_in_flight_permits", "Permits out."}
	BulkheadLimit      = Metric{"bulkhead_limit_permits", "The limit in force."}
	BulkheadQueueDepth = Metric{"bulkhead_queue_depth", "Requests waiting for a permit."}
	BulkheadAcquired   = Metric{"bulkhead_acquired_total", "Acquires granted, whatever their weight."}
	BulkheadQueued     = Metric{"bulkhead_queued_total", "Acquires that had to wait in the queue."}
	BulkheadRejected   = Metric{"bulkhead_rejected_total", "Acquires refused, by error code."}
)

// The codes a bulkhead's refusal is counted under, beside its errors' codes.
const (
	CodeCancelled = "cancelled"
	CodeDeadline  = "deadline_exceeded"
	CodeOther     = "other"
)

// refusals are the bulkhead's errors an acquire can fail with.
var refusals = []*bulkhead.Error{bulkhead.ErrAtCapacity, bulkhead.ErrQueueSaturated, bulkhead.ErrQueueTimeout,
	bulkhead.ErrDraining, bulkhead.ErrCapabilityRequired, bulkhead.ErrGoexit}

// RejectionCodes are every code a bulkhead's refusal can be counted under,
// a fixed set.
func RejectionCodes() []string {
	codes := []string{CodeCancelled, CodeDeadline, CodeOther}
	for _, e := range refusals {
		codes = append(codes, e.Code())
	}
	return codes
}

// RejectionCode maps the Detail of a bulkhead's rejection event to its
// code. Detail is the error's code, but the error's text for a request
// whose context ended: the text of a context's error is not a stable code,
// and a custom context's is unbounded.
func RejectionCode(detail string) string {
	switch detail {
	case context.Canceled.Error():
		return CodeCancelled
	case context.DeadlineExceeded.Error():
		return CodeDeadline
	}
	for _, e := range refusals {
		if detail == e.Code() || detail == e.Error() {
			return e.Code()
		}
	}
	return CodeOther
}
