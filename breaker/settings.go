package breaker

import (
	"fmt"
	"time"

	"github.com/groupexec/groupexec/clock"
	"github.com/groupexec/groupexec/internal/typednil"
)

// The defaults New uses for zero Settings fields.
const (
	DefaultMaxRequests = 1
	DefaultTimeout     = 60 * time.Second
	// DefaultConsecutiveFailures is how many consecutive failures trip a
	// breaker whose ReadyToTrip is nil.
	DefaultConsecutiveFailures = 5
)

// Settings configures a CircuitBreaker. The zero value is valid: every zero
// field means the default its comment gives. Settings are read once, by New.
type Settings struct {
	// Name is passed to OnStateChange and returned by Name.
	Name string
	// MaxRequests is how many requests may be in flight at once while the
	// breaker is half-open (probes), and how many consecutive probe successes
	// close it. 0 means DefaultMaxRequests (1). A probe holds its slot until
	// its outcome is recorded, even if the breaker has reopened and
	// half-opened again meanwhile: the bound holds across periods. Time
	// does not free a slot: MaxRequests probes that are never finished
	// (Allow's done never called, a Ticket dropped) leave the breaker
	// half-open, refusing every request with ErrTooManyRequests, for good.
	MaxRequests uint32
	// Interval is how often a closed breaker clears its counts, so that old
	// failures stop counting. The period starts when the breaker closes (or
	// is created); the first request at or after its end clears the counts
	// and starts the next one; a failure reported after the end and before
	// that request cannot trip the breaker. 0 means never: counts are
	// cleared only when the breaker changes state. With Interval > 0 every
	// closed-state request reads the clock. A request that finds the clock
	// earlier than the start of the period (a Clock stepped back) starts
	// the next one, so the step does not add to Interval. Negative is
	// invalid.
	Interval time.Duration
	// Timeout is how long the breaker stays open: the first request at or
	// after Timeout since it opened moves it to half-open. 0 means
	// DefaultTimeout (60 s). Negative is invalid. A request that finds the
	// clock earlier than the moment the breaker opened (a Clock stepped
	// back) restarts the Timeout, so the step does not add to it.
	Timeout time.Duration
	// ReadyToTrip is called, in the closed state, after each failure is
	// counted, with the counts including that failure; when it returns true
	// the breaker opens. nil means: trip on the DefaultConsecutiveFailures-th
	// (5th) consecutive failure. It may be called concurrently and must not
	// block; a panic in it propagates to the caller that recorded the
	// failure, unless Execute records it for a function (or IsSuccessful)
	// that panicked or called runtime.Goexit: that goes on up unchanged,
	// and ReadyToTrip's panic is dropped.
	ReadyToTrip func(counts Counts) bool
	// IsSuccessful tells Execute whether the error its function returned is
	// a success. nil means err == nil. It may be called concurrently.
	IsSuccessful func(err error) bool
	// OnStateChange, when not nil, is called once per state change, after
	// the change is visible to every caller, in the goroutine that made it,
	// before the call that made it (a request, or the recording of its
	// outcome) returns. The breaker holds no lock while calling it, so it
	// may use the breaker. A panic in it is recovered and discarded. One
	// that exits the goroutine (runtime.Goexit) ends the call that made
	// the change, which stands; as Execute records the failure of a
	// function that panicked, that panic still reaches Execute's caller.
	// Changes made by different goroutines may be reported concurrently, and
	// so not necessarily in the order they happened.
	OnStateChange func(name string, from, to State)
	// Clock is the time source: the breaker only calls its Now, never
	// AfterFunc, so time moves a breaker only when a request looks at it.
	// Durations are taken as differences of Now, so clock.Real, whose times
	// carry Go's monotonic reading, is immune to wall-clock jumps; tests
	// pass a clock.Fake. Now must be safe for concurrent use. nil means
	// clock.Real; a Clock holding a nil pointer (a nil *clock.Fake),
	// function, map, slice or channel is invalid.
	Clock clock.Clock
}

// validate returns the first invalid field's error.
func (s *Settings) validate() error {
	if s.Interval < 0 {
		return &SettingsError{Field: "Interval", Value: s.Interval, Reason: "must be >= 0 (0: never clear the counts)"}
	}
	if s.Timeout < 0 {
		return &SettingsError{Field: "Timeout", Value: s.Timeout, Reason: "must be >= 0 (0: the default, 60s)"}
	}
	if typednil.Is(s.Clock) {
		// Its Now would panic (or, on a nil channel, block for good), and
		// the breaker reads the clock only when time matters (a trip, or an
		// Interval): long after New, on the failure that trips it.
		return &SettingsError{Field: "Clock", Value: fmt.Sprintf("%T(nil)", s.Clock), Reason: "must not hold a nil pointer, function, map, slice or channel (nil for clock.Real)"}
	}
	return nil
}

// State is a circuit breaker's state.
type State int32

// The three states. A breaker starts closed.
const (
	// StateClosed lets requests through and counts their outcomes.
	StateClosed State = iota
	// StateOpen refuses requests with ErrOpenState until Timeout has passed.
	StateOpen
	// StateHalfOpen lets up to MaxRequests probes through at a time and
	// refuses the rest with ErrTooManyRequests.
	StateHalfOpen
)

// String returns "closed", "open" or "half-open".
func (s State) String() string {
	switch s {
	case StateClosed:
		return "closed"
	case StateOpen:
		return "open"
	case StateHalfOpen:
		return "half-open"
	}
	return fmt.Sprintf("State(%d)", int32(s))
}

// Counts are the request counts of the breaker's current period: since it
// last changed state or, when closed, since its counts were last cleared
// (see Settings.Interval). An open breaker's counts are zero: refused
// requests are not counted.
//
// Under concurrent use a snapshot is approximate, but it always satisfies
// TotalSuccesses+TotalFailures <= Requests.
type Counts struct {
	// Requests is how many requests were let through (an ignored one, see
	// Ticket.Ignore, is taken back off).
	Requests uint64
	// TotalSuccesses and TotalFailures count the recorded outcomes.
	TotalSuccesses uint64
	TotalFailures  uint64
	// ConsecutiveSuccesses is how many successes were recorded since the
	// last failure, ConsecutiveFailures how many failures since the last
	// success; one of them is 0 in serial use.
	ConsecutiveSuccesses uint64
	ConsecutiveFailures  uint64
}

func defaultReadyToTrip(c Counts) bool { return c.ConsecutiveFailures >= DefaultConsecutiveFailures }
