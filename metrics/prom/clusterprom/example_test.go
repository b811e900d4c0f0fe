package clusterprom_test

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/groupexec/groupexec/cluster/redislimit"
	"github.com/groupexec/groupexec/metrics/prom/clusterprom"
)

// Export a holder's mode and counters next to the executor's metrics:
// myapp_cluster_up{policy="fail-closed"} drops to 0 during an outage, and
// myapp_cluster_rejected_total counts the tasks it refused. A program
// passes its *redislimit.Holder (clusterprom.New(h, "myapp")) and serves
// the registry with promhttp.HandlerFor; a fixed Stats of a holder in an
// outage stands in for one here.
func Example() {
	h := fixed(redislimit.Stats{Mode: redislimit.ModeDown, Policy: redislimit.FailClosed, Rejected: 7})
	reg := prometheus.NewRegistry()
	reg.MustRegister(clusterprom.New(h, "myapp"))
	mfs, err := reg.Gather()
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, mf := range mfs {
		m := mf.GetMetric()[0]
		switch mf.GetName() {
		case "myapp_cluster_up":
			l := m.GetLabel()[0]
			fmt.Printf("%s{%s=%q} %v\n", mf.GetName(), l.GetName(), l.GetValue(), m.GetGauge().GetValue())
		case "myapp_cluster_rejected_total":
			fmt.Println(mf.GetName(), m.GetCounter().GetValue())
		}
	}
	// Output:
	// myapp_cluster_rejected_total 7
	// myapp_cluster_up{policy="fail-closed"} 0
}
