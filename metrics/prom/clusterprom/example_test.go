package clusterprom_test

import (
	"log"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"

	"github.com/groupexec/groupexec/cluster/redislimit"
	"github.com/groupexec/groupexec/metrics/prom/clusterprom"
)

// Export a holder's mode and counters next to the executor's metrics:
// myapp_cluster_up{policy="fail-closed"} drops to 0 during an outage, and
// myapp_cluster_rejected_total counts the tasks it refused.
func Example() {
	h, err := redislimit.New(redis.NewClient(&redis.Options{Addr: "localhost:6379", MaxRetries: -1}))
	if err != nil {
		log.Fatal(err)
	}
	defer h.Close()
	reg := prometheus.NewRegistry()
	reg.MustRegister(clusterprom.New(h, "myapp"))
	http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
}
