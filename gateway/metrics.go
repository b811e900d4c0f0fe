package gateway

import (
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/groupexec/groupexec/metrics/prom"
)

// metrics are the gateway's own series, beside the executor's (package
// prom), all under one namespace (metrics.namespace). Names follow the
// concurrency design's where it has one. docs/gateway.md lists them.
type metrics struct {
	reg          *prometheus.Registry
	requests     *prometheus.CounterVec   // gateway_requests_total{tenant,code}
	latency      *prometheus.HistogramVec // gateway_request_duration_seconds{tenant}
	busy         *prometheus.CounterVec   // busy_rejections_total{endpoint}
	rejected     *prometheus.CounterVec   // rejected_total{reason}
	queueDropped prometheus.Counter       // queue_dropped_total{queue="tenant"}
	spawned      prometheus.Counter       // tasks_spawned_total{kind="request"}
	canceled     *prometheus.CounterVec   // tasks_canceled_total{kind}
	aborted      *prometheus.CounterVec   // tasks_aborted_total{kind}
	ioTimeouts   *prometheus.CounterVec   // io_timeouts_total{op}
	retries      *prometheus.CounterVec   // backoff_retries_total{op}
	reclaimed    prometheus.Counter       // gateway_connections_reclaimed_total
	refused      prometheus.Counter       // gateway_connections_refused_total
	reloads      *prometheus.CounterVec   // config_reloads_total{result}

	mu     sync.RWMutex
	series map[string]*groupSeries // by labelled group, and prom.OtherGroup
}

// groupSeries are one group's request counters and latency histogram,
// looked up once: a request's observation then neither hashes its labels
// nor formats its status code.
type groupSeries struct {
	group    string
	requests *prometheus.CounterVec
	latency  prometheus.Observer
	codes    [500]atomic.Pointer[prometheus.Counter] // by status - 100
}

func (s *groupSeries) count(code int) {
	if code < 100 || code >= 600 {
		s.requests.WithLabelValues(s.group, strconv.Itoa(code)).Inc()
		return
	}
	p := s.codes[code-100].Load()
	if p == nil {
		c := s.requests.WithLabelValues(s.group, strconv.Itoa(code))
		p = &c
		s.codes[code-100].Store(p)
	}
	(*p).Inc()
}

// seriesOf returns group's series, or the summed ones of the groups
// without series of their own.
func (m *metrics) seriesOf(group string, labelled bool) *groupSeries {
	if !labelled {
		group = prom.OtherGroup
	}
	m.mu.RLock()
	s := m.series[group]
	m.mu.RUnlock()
	if s != nil {
		return s
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if s = m.series[group]; s == nil {
		s = &groupSeries{group: group, requests: m.requests, latency: m.latency.WithLabelValues(group)}
		m.series[group] = s
	}
	return s
}

// endpointProxy is the busy_rejections_total endpoint label of proxied
// requests: the gateway has one endpoint, and paths are client-chosen.
const endpointProxy = "proxy"

// gauges are the levels read at scrape time.
type gauges struct {
	degraded  func() bool
	inGateway func() int
	conns     func() int
	breakers  func() []*backendBreaker
	spooled   func() int64
}

func newMetrics(ns string, exec *prom.Collector, gg gauges) *metrics {
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: name, Help: help}, labels)
	}
	gauge := func(name, help string, f func() float64) prometheus.GaugeFunc {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: ns, Name: name, Help: help}, f)
	}
	queueDropped := counter("queue_dropped_total",
		"Requests that waited in a tenant's queue and left it without running: queue timeout, deadline, client gone.", "queue")
	spawned := counter("tasks_spawned_total", "Requests admitted to run (proxied to a backend).", "kind")
	reclaimed := counter("gateway_connections_reclaimed_total", "Idle client connections closed to make room under max_conns, or under their client address's max_conns_per_client.")
	refused := counter("gateway_connections_refused_total", "Client connections refused as accepted, their client address holding max_conns_per_client: answered 503 too_many_connections on a plain listener, then closed.")
	m := &metrics{
		reg:    prometheus.NewRegistry(),
		series: make(map[string]*groupSeries),
		requests: counter("gateway_requests_total",
			"Requests answered, by tenant (configured tenants, the default and overflow groups, else _other) and status code.",
			"tenant", "code"),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: "gateway_request_duration_seconds",
			Help: "Time from arrival to the end of the response (to the 101 of a protocol upgrade), by tenant.", Buckets: prometheus.DefBuckets}, []string{"tenant"}),
		busy:         counter("busy_rejections_total", "Requests answered 429 because the executor refused them.", "endpoint"),
		rejected:     counter("rejected_total", "Requests the gateway refused for what the client sent or its rate, by reason.", "reason"),
		queueDropped: queueDropped.WithLabelValues("tenant"),
		spawned:      spawned.WithLabelValues("request"),
		canceled:     counter("tasks_canceled_total", "Requests whose client went away: while proxied (request) or waiting (queued).", "kind"),
		aborted:      counter("tasks_aborted_total", "Requests still running at the drain deadline, cancelled.", "kind"),
		ioTimeouts:   counter("io_timeouts_total", "Timeouts: read (client body), connect (backend dial), upstream (backend past the request deadline).", "op"),
		retries:      counter("backoff_retries_total", "Retries of idempotent requests after a transport error.", "op"),
		reclaimed:    reclaimed.WithLabelValues(),
		refused:      refused.WithLabelValues(),
		reloads:      counter("config_reloads_total", "Config reloads (SIGHUP, POST /reload), by result: ok, error.", "result"),
	}
	// Series that matter at zero are created up front, so dashboards and
	// alerts see a 0 rather than no data.
	m.busy.WithLabelValues(endpointProxy)
	m.aborted.WithLabelValues("request")
	for _, k := range []string{"request", "queued"} {
		m.canceled.WithLabelValues(k)
	}
	for _, op := range []string{"read", "connect", "upstream"} {
		m.ioTimeouts.WithLabelValues(op)
	}
	for _, r := range []string{"body-size", "decoded-size", "decoded-ratio", "spool-size", "spool-full", "rate-limited"} {
		m.rejected.WithLabelValues(r)
	}
	for _, r := range []string{"ok", "error"} {
		m.reloads.WithLabelValues(r)
	}
	m.retries.WithLabelValues("upstream")
	m.reg.MustRegister(exec, m.requests, m.latency, m.busy, m.rejected, m.canceled, m.aborted, m.ioTimeouts, m.retries, m.reloads,
		queueDropped, spawned, reclaimed, refused,
		gauge("gateway_degraded", "1 while the gateway is draining, cannot reach any backend or has every backend's breaker open, else 0.",
			func() float64 {
				if gg.degraded() {
					return 1
				}
				return 0
			}),
		gauge("gateway_requests_in_flight", "Requests in the gateway: being received, waiting, running or being answered.",
			func() float64 { return float64(gg.inGateway()) }),
		gauge("gateway_connections", "Client connections open (max_conns caps them).",
			func() float64 { return float64(gg.conns()) }),
		gauge("gateway_spool_bytes", "Bytes of request bodies held in spool files (body.spool_max_bytes caps them).",
			func() float64 { return float64(gg.spooled()) }),
		&breakerStates{desc: prometheus.NewDesc(prometheus.BuildFQName(ns, "", "breaker_state"),
			"Each backend's circuit breaker: 0 closed, 1 open, 2 half-open.", []string{"backend"}, nil), list: gg.breakers},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// breakerStates exports each backend breaker's state at scrape time.
type breakerStates struct {
	desc *prometheus.Desc
	list func() []*backendBreaker
}

func (b *breakerStates) Describe(ch chan<- *prometheus.Desc) { ch <- b.desc }

func (b *breakerStates) Collect(ch chan<- prometheus.Metric) {
	for _, bb := range b.list() {
		ch <- prometheus.MustNewConstMetric(b.desc, prometheus.GaugeValue, float64(bb.cb.State()), bb.name)
	}
}
