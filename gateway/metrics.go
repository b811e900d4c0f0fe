package gateway

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/groupexec/groupexec/metrics/prom"
)

// metrics are the gateway's own series, beside the executor's (package
// prom). Names follow the concurrency design's where they fit.
type metrics struct {
	reg        *prometheus.Registry
	busy       *prometheus.CounterVec   // busy_rejections_total{endpoint}
	aborted    *prometheus.CounterVec   // tasks_aborted_total{kind}
	ioTimeouts *prometheus.CounterVec   // io_timeouts_total{op}
	retries    *prometheus.CounterVec   // backoff_retries_total{op}
	rejected   *prometheus.CounterVec   // rejected_total{reason}
	reclaimed  prometheus.Counter       // gateway_connections_reclaimed_total
	requests   *prometheus.CounterVec   // gateway_requests_total{tenant,code}
	latency    *prometheus.HistogramVec // gateway_request_duration_seconds{tenant}
}

// endpointProxy is the busy_rejections_total endpoint label of proxied
// requests: the gateway has one endpoint, and paths are client-chosen.
const endpointProxy = "proxy"

func newMetrics(exec *prom.Collector, degraded func() bool, inGateway, conns func() int) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		busy: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "busy_rejections_total",
			Help: "Requests answered 429 because the executor refused them."}, []string{"endpoint"}),
		aborted: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tasks_aborted_total",
			Help: "Requests still running at the drain deadline, cancelled."}, []string{"kind"}),
		ioTimeouts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "io_timeouts_total",
			Help: "Timeouts: read (client body), connect (backend dial), upstream (backend past the request deadline)."}, []string{"op"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "backoff_retries_total",
			Help: "Retries of idempotent requests after a transport error."}, []string{"op"}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rejected_total",
			Help: "Requests the gateway refused for what the client sent, by reason."}, []string{"reason"}),
		reclaimed: prometheus.NewCounter(prometheus.CounterOpts{Name: "gateway_connections_reclaimed_total",
			Help: "Idle client connections closed to make room under max_conns."}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gateway_requests_total",
			Help: "Requests answered, by tenant (configured tenants, the default and overflow groups, else _other) and status code."},
			[]string{"tenant", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "gateway_request_duration_seconds",
			Help: "Time from arrival to the end of the response, by tenant.", Buckets: prometheus.DefBuckets}, []string{"tenant"}),
	}
	// Series that matter at zero are created up front, so dashboards and
	// alerts see a 0 rather than no data.
	m.busy.WithLabelValues(endpointProxy)
	m.aborted.WithLabelValues("request")
	for _, op := range []string{"read", "connect", "upstream"} {
		m.ioTimeouts.WithLabelValues(op)
	}
	m.retries.WithLabelValues("upstream")
	m.reg.MustRegister(exec, m.busy, m.aborted, m.ioTimeouts, m.retries, m.rejected, m.reclaimed, m.requests, m.latency,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "gateway_degraded",
			Help: "1 while the gateway is draining or cannot reach any backend, else 0."},
			func() float64 {
				if degraded() {
					return 1
				}
				return 0
			}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "gateway_requests_in_flight",
			Help: "Requests in the gateway: being received, waiting, running or being answered."},
			func() float64 { return float64(inGateway()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "gateway_connections",
			Help: "Client connections open (max_conns caps them)."},
			func() float64 { return float64(conns()) }),
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}
