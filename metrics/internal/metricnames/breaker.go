package metricnames

import (
	"unicode/utf8"

	"github.com/groupexec/groupexec/breaker"
)

// Circuit breakers' metrics, each with the label breaker; the transitions
// with the labels from and to too.
var (
	BreakerState               = Metric{"breaker_state", "The breaker's state: 0 closed, 1 open, 2 half-open."}
	BreakerRequests            = Metric{"breaker_requests", "Requests let through in the current period."}
	BreakerSuccesses           = Metric{"breaker_successes", "Successes recorded in the current period."}
	BreakerFailures            = Metric{"breaker_failures", "Failures recorded in the current period."}
	BreakerConsecutiveFailures = Metric{"breaker_consecutive_failures", "Failures recorded since the last success."}
	BreakerTransitions         = Metric{"breaker_transitions_total", "Changes of state, by breaker, from and to."}
)

// StateLabel is a breaker state's label value: "closed", "open" or
// "half-open", and "other" for a value that is none of the three, which a
// breaker never reports but an OnStateChange call may: its String,
// "State(7)", would make a series of each of 2^32 values.
func StateLabel(s breaker.State) string {
	switch s {
	case breaker.StateClosed, breaker.StateOpen, breaker.StateHalfOpen:
		return s.String()
	}
	return "other"
}

// BreakerLabel is the breaker label value a change of state of the breaker
// called name is counted under: name itself, or OtherGroup for a name that
// is not valid UTF-8, which no Prometheus label value may hold and no OTLP
// exporter may send, or longer than MaxGroupLen bytes. Group keys name
// group breakers, and a client-chosen key of any length would be kept, and
// exported, for good.
func BreakerLabel(name string) string {
	if !utf8.ValidString(name) || len(name) > MaxGroupLen {
		return OtherGroup
	}
	return name
}
