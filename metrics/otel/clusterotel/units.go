package clusterotel

import "github.com/groupexec/groupexec/metrics/internal/clusternames"

// units are the UCUM units of clusternames' counters and levels, by name:
// annotations of what each counts. A name missing here would be exported
// without a unit; TestObserveKindsAndUnits fails for it.
var units = map[string]string{
	"round_trips_total":      "{call}",
	"permits_acquired_total": "{permit}",
	"fallbacks_total":        "{permit}",
	"rejected_total":         "{task}",
	"refills_total":          "{block}",
	"refills_denied_total":   "{refill}",
	"permits_returned_total": "{permit}",
	"renewals_total":         "{round}",
	"leases_lost_total":      "{lease}",
	"tasks_cancelled_total":  "{task}",
	"outages_total":          "{outage}",
	"key_failed_total":       "{task}",
	"leases":                 "{lease}",
	"permits_leased":         "{permit}",
	"permits_in_use":         "{permit}",
}

// names are the names, after "cluster_", of every instrument Observe makes.
func names() []string {
	n := []string{"up"}
	for _, c := range clusternames.Counters {
		n = append(n, c.Name)
	}
	for _, g := range clusternames.Gauges {
		n = append(n, g.Name)
	}
	return n
}
