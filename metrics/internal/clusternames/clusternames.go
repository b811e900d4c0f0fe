// Package clusternames holds the table of a cluster limiter's numbers that
// metrics/prom/clusterprom and metrics/otel/clusterotel export under the
// same names: one place to add a counter to both.
package clusternames

import "github.com/groupexec/groupexec/cluster/redislimit"

// Up is cluster_up's help text.
const Up = "1 while the holder reaches Redis (ModeUp), 0 while it is down and its failure policy applies, or once it is closed."

// A Counter is a counter of redislimit.Stats: its name after "cluster_",
// its help text, and how to read it.
type Counter struct {
	Name, Help string
	Get        func(redislimit.Stats) uint64
}

// A Gauge is a level of redislimit.Stats, likewise.
type Gauge struct {
	Name, Help string
	Get        func(redislimit.Stats) int
}

// Counters are every counter of redislimit.Stats.
var Counters = []Counter{
	{"round_trips_total", "Calls to Redis (a pipeline counts once).", func(s redislimit.Stats) uint64 { return s.RoundTrips }},
	{"permits_acquired_total", "Permits handed to tasks from leased blocks.", func(s redislimit.Stats) uint64 { return s.Acquired }},
	{"fallbacks_total", "Fallback permits handed out under FailOpen while Redis was unreachable.", func(s redislimit.Stats) uint64 { return s.Fallbacks }},
	{"rejected_total", "Tasks refused under FailClosed while Redis was unreachable.", func(s redislimit.Stats) uint64 { return s.Rejected }},
	{"refills_total", "Blocks of permits leased.", func(s redislimit.Stats) uint64 { return s.Refills }},
	{"refills_denied_total", "Refills Redis refused: too few permits free, or the holder at its share while others wait.", func(s redislimit.Stats) uint64 { return s.RefillsDenied }},
	{"permits_returned_total", "Permits given back to Redis unused.", func(s redislimit.Stats) uint64 { return s.Returned }},
	{"renewals_total", "Renewal rounds that renewed leases in Redis.", func(s redislimit.Stats) uint64 { return s.Renewals }},
	{"leases_lost_total", "Leases lost (not renewed in time, or gone from Redis); not those given back at Close.", func(s redislimit.Stats) uint64 { return s.LeasesLost }},
	{"tasks_cancelled_total", "Running tasks cancelled because their lease was lost; not those cancelled by Close.", func(s redislimit.Stats) uint64 { return s.TasksCancelled }},
	{"outages_total", "Transitions to down (three failed calls in a row).", func(s redislimit.Stats) uint64 { return s.Outages }},
	{"key_failed_total", "Tasks refused because Redis answered their key's refill with an error reply that is no outage (WRONGTYPE).", func(s redislimit.Stats) uint64 { return s.KeyFailed }},
}

// Gauges are the levels of redislimit.Stats.
var Gauges = []Gauge{
	{"leases", "Leases held now.", func(s redislimit.Stats) int { return s.Leases }},
	{"permits_leased", "Permits in the leases held now.", func(s redislimit.Stats) int { return s.PermitsLeased }},
	{"permits_in_use", "Leased permits held by running tasks now.", func(s redislimit.Stats) int { return s.PermitsInUse }},
}
