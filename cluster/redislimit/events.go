package redislimit

import "time"

// EventKind says what an Event reports.
type EventKind uint8

const (
	// EventUnavailable: calls to Redis failed three times in a row; the
	// holder now applies its failure policy (Event.Policy) until Redis
	// answers again. Err is the last failure.
	EventUnavailable EventKind = iota + 1
	// EventRecovered: Redis answers again after EventUnavailable.
	EventRecovered
	// EventFallback: under FailOpen, Count tasks of Key got fallback
	// permits (no lease) since the last such event. Close reports those
	// not reported yet, so that the events count every Stats.Fallbacks.
	EventFallback
	// EventRejected: under FailClosed, Count tasks of Key were refused with
	// ErrUnavailable since the last such event; Close reports those not
	// reported yet, as for EventFallback.
	EventRejected
	// EventLeaseLost: a lease of Key (Token, Permits) was lost; Tasks is
	// how many running tasks had their context cancelled. Err is the
	// *LeaseLostError. Close's give-backs emit none.
	EventLeaseLost
	// EventKeyFailed: Count tasks of Key were refused with ErrKeyFailed
	// since the last such event (Redis answered the key's refill with an
	// error reply that is no outage); Err is the last one's error, which
	// names the key and carries the reply. Close reports those not
	// reported yet, as for EventFallback.
	EventKeyFailed
)

// String returns the kind's name in lower case ("lease-lost").
func (k EventKind) String() string {
	switch k {
	case EventUnavailable:
		return "unavailable"
	case EventRecovered:
		return "recovered"
	case EventFallback:
		return "fallback"
	case EventRejected:
		return "rejected"
	case EventLeaseLost:
		return "lease-lost"
	case EventKeyFailed:
		return "key-failed"
	}
	return "EventKind(?)"
}

// Event is a change in a holder's state, for logs and metrics.
type Event struct {
	Kind    EventKind     // what happened; each kind says which fields it sets
	Time    time.Time     // when, on the holder's clock
	Policy  FailurePolicy // the holder's failure policy
	Key     string        // the executor's key; "" for the global limit or the holder as a whole
	Count   int           // tasks given fallback permits or refused (EventFallback, EventRejected, EventKeyFailed)
	Token   int64         // the lost lease's fencing token (EventLeaseLost)
	Permits int           // the lost lease's permits (EventLeaseLost)
	Tasks   int           // running tasks whose context was cancelled (EventLeaseLost)
	Err     error         // the failure, where the kind has one
}

// Mode is whether the holder reaches Redis.
type Mode uint8

const (
	// ModeUp: Redis answers (one failed call, or two in a row, do not
	// change that).
	ModeUp Mode = iota + 1
	// ModeDown: the last three calls to Redis failed, and none has
	// succeeded since; the failure policy applies.
	ModeDown
	// ModeClosed: Close was called; the holder leases nothing more, and
	// its Limiters refuse every task with ErrClosed.
	ModeClosed
)

// String returns "up", "down" or "closed".
func (m Mode) String() string {
	switch m {
	case ModeDown:
		return "down"
	case ModeClosed:
		return "closed"
	}
	return "up"
}

// Stats are a holder's counters. Every field but Mode, Policy, Leases and
// Permits* is cumulative.
type Stats struct {
	Mode   Mode          // whether the holder reaches Redis now
	Policy FailurePolicy // the holder's failure policy
	// RoundTrips counts calls to Redis (a pipeline counts once).
	RoundTrips uint64
	// Acquired counts permits handed to tasks from leased blocks (a
	// task of weight n takes n, as PermitsInUse and Returned count
	// them); Fallbacks the fallback permits handed out under FailOpen
	// while Redis was down, one per task (as EventFallback counts them);
	// Rejected the tasks refused under FailClosed.
	Acquired, Fallbacks, Rejected uint64
	// Refills counts blocks leased; RefillsDenied the refills Redis
	// refused: too few of the key's permits free in Redis for the task
	// asked for, or, while other holders wait, the holder at its share
	// (its cap) already.
	Refills, RefillsDenied uint64
	// Returned counts permits given back to Redis unused: those no task
	// needed (renewal rounds), those above the cap while others wait, and
	// the free permits of the leases Close gives back (not those of the
	// tasks it cancels), with the whole of a block whose grant came after
	// Close began, or too late to use (after its local validity).
	Returned uint64
	// Renewals counts renewal rounds that asked Redis to renew leases and
	// had its answer; not the rounds with no lease to renew, which only
	// give permits back or probe Redis while it is down, nor those whose
	// every renewal Redis refused with an error reply (WRONGTYPE).
	Renewals uint64
	// LeasesLost counts leases lost (not renewed in time, or gone from
	// Redis); TasksCancelled the running tasks whose context was cancelled
	// for it, each once (a task that loses both its global and its group
	// lease is one task; EventLeaseLost counts it in each lease's event).
	// The leases Close gives back are not lost: neither counts them, nor
	// the tasks Close cancels, and no EventLeaseLost reports them.
	LeasesLost, TasksCancelled uint64
	// Outages counts transitions to ModeDown.
	Outages uint64
	// KeyFailed counts the tasks refused with ErrKeyFailed: Redis answered
	// their key's refill with an error reply that is no outage (WRONGTYPE).
	KeyFailed uint64
	// Leases is the leases held now; PermitsLeased their permits and
	// PermitsInUse those handed to running tasks.
	Leases, PermitsLeased, PermitsInUse int
}
