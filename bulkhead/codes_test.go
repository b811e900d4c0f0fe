package bulkhead_test

import (
	"testing"

	"github.com/groupexec/groupexec/bulkhead"
)

// The package doc makes the event codes a contract, as the error codes
// (TestCodesAreStable): a dashboard or an audit keyed on one must keep
// matching, whatever the Go name says.
func TestEventCodesAreStable(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{bulkhead.EventPermitAcquired, "RB_PERMIT_ACQUIRED"},
		{bulkhead.EventPermitReleased, "RB_PERMIT_RELEASED"},
		{bulkhead.EventAtCapacity, "RB_AT_CAPACITY"},
		{bulkhead.EventRequestQueued, "RB_REQUEST_QUEUED"},
		{bulkhead.EventRequestRejected, "RB_REQUEST_REJECTED"},
		{bulkhead.EventCapChanged, "RB_CAP_CHANGED"},
		{bulkhead.EventDrainActive, "RB_DRAIN_ACTIVE"},
		{bulkhead.EventDrainComplete, "RB_DRAIN_COMPLETE"},
		{bulkhead.EventLatencyReport, "RB_LATENCY_REPORT"},
	} {
		if c.got != c.want {
			t.Errorf("event code %q, want %q", c.got, c.want)
		}
	}
}
