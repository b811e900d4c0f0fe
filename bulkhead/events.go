package bulkhead

import "time"

// Stable event codes. They are a contract: dashboards and audits key on them.
const (
	EventPermitAcquired  = "RB_PERMIT_ACQUIRED"  // a permit was issued
	EventPermitReleased  = "RB_PERMIT_RELEASED"  // a permit came back
	EventAtCapacity      = "RB_AT_CAPACITY"      // an acquire could not have its permits at once: too few free, a waiter ahead of it, or more than the limit
	EventRequestQueued   = "RB_REQUEST_QUEUED"   // an acquire began to wait in the queue
	EventRequestRejected = "RB_REQUEST_REJECTED" // an acquire failed; Detail is the error's code, or the context's error for a request whose context ended (context.Canceled's if its Done closed with a nil Err; a fixed text if its Error panics, ErrGoexit's code if it exits the goroutine); PermitID is 0, or the permit a waiter was issued as it gave up, which it gave back
	EventCapChanged      = "RB_CAP_CHANGED"      // SetLimit changed the limit
	EventDrainActive     = "RB_DRAIN_ACTIVE"     // a drain began or goes on: Detail "started", "lowered again", "raised" (not enough to end it) or "refused an acquire"
	EventDrainComplete   = "RB_DRAIN_COMPLETE"   // in-flight dropped below the lowered limit
	EventLatencyReport   = "RB_LATENCY_REPORT"   // a latency sample was recorded
)

// Event is one state transition, as it was when it happened.
type Event struct {
	Code     string        // one of the Event* codes
	Time     time.Time     // from the bulkhead's clock
	InFlight int           // permits out after the transition
	Limit    int           // the limit in force
	Queued   int           // requests waiting after the transition
	PermitID uint64        // the permit concerned, if any
	Latency  time.Duration // for EventLatencyReport
	Detail   string        // e.g. the error code of a rejection, the previous limit
}

// A Listener observes events. It is called best-effort: on the goroutine that
// caused the event, possibly concurrently with other calls, never under the
// bulkhead's locks (it may call the bulkhead). A panic in a listener is
// recovered and ignored. Listeners see events in nearly, not strictly, the
// order they happened; Events() has the exact order.
type Listener interface {
	OnEvent(Event) // one call per event, outside the bulkhead's locks
}

// ListenerFunc adapts a function to a Listener.
type ListenerFunc func(Event)

// OnEvent calls f(e).
func (f ListenerFunc) OnEvent(e Event) { f(e) }

// eventRing keeps the last events, oldest overwritten. Guarded by the
// bulkhead's mutex, so its order is the order of the transitions.
type eventRing struct {
	buf  []Event
	next int
	full bool
}

func (r *eventRing) add(e Event) {
	r.buf[r.next] = e
	r.next++
	if r.next == len(r.buf) {
		r.next, r.full = 0, true
	}
}

func (r *eventRing) events() []Event {
	if !r.full {
		return append([]Event(nil), r.buf[:r.next]...)
	}
	out := make([]Event, 0, len(r.buf))
	out = append(out, r.buf[r.next:]...)
	return append(out, r.buf[:r.next]...)
}

// events collects the events of one operation under the lock, to be
// delivered to listeners after it. Most operations emit one or two.
type events struct {
	n     int
	small [3]Event
	more  []Event
}

func (es *events) add(e Event) {
	if es.n < len(es.small) {
		es.small[es.n] = e
	} else {
		es.more = append(es.more, e)
	}
	es.n++
}

func (es *events) each(f func(Event)) {
	for i := range min(es.n, len(es.small)) {
		f(es.small[i])
	}
	for _, e := range es.more {
		f(e)
	}
}

// record logs an event under the lock; the caller delivers es after
// unlocking. Only called when b.observed.
func (b *Bulkhead) record(es *events, e Event) {
	e.InFlight, e.Limit, e.Queued = b.sem.Used(), b.sem.Limit(), b.waiters.Len()
	if b.ring != nil {
		b.ring.add(e)
	}
	if b.listener != nil {
		es.add(e)
	}
}

// deliver calls the listener for each collected event, outside the lock.
func (b *Bulkhead) deliver(es *events) {
	if b.listener == nil || es.n == 0 {
		return
	}
	es.each(b.notify)
}

func (b *Bulkhead) notify(e Event) {
	defer func() { _ = recover() }() // a listener's failure is not the bulkhead's
	b.listener.OnEvent(e)
}

// Events returns the last events kept by WithEventLog, oldest first; nil
// without an event log.
func (b *Bulkhead) Events() []Event {
	if b.ring == nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.ring.events()
}
