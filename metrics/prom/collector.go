package prom

import (
	"fmt"
	"math"
	"slices"
	"sync"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/metrics/internal/metricnames"
)

// OtherGroup is the group label of every group without series of its own.
const OtherGroup = metricnames.OtherGroup

// DefaultMaxGroups is how many groups get series of their own when
// Options.Labelled is nil.
const DefaultMaxGroups = metricnames.DefaultMaxGroups

// MaxGroupLen is the longest group key, in bytes, that gets series of its
// own; longer ones are summed under OtherGroup.
const MaxGroupLen = metricnames.MaxGroupLen

// Options configure a Collector. The zero value is valid.
type Options struct {
	// Namespace, when set, prefixes every metric name ("myapp" gives
	// myapp_queue_depth).
	Namespace string
	// Labelled reports whether group gets series of its own; the others are
	// summed under OtherGroup. It must be safe for concurrent use and accept
	// a bounded set: each accepted group is kept, and read on every scrape,
	// for the life of the Collector, and is not asked again (a group it
	// accepted once keeps its series). nil means: the first MaxGroups
	// distinct groups seen.
	Labelled func(group string) bool
	// MaxGroups bounds the groups with series of their own when Labelled is
	// nil. 0 means DefaultMaxGroups; negative is invalid.
	MaxGroups int
	// Buckets are the histograms' bucket bounds, in seconds, in strictly
	// increasing order; nil or empty means prometheus.DefBuckets. A last
	// bound of +Inf is dropped, as prometheus.NewHistogram drops it: every
	// histogram has that bucket; +Inf alone is invalid.
	Buckets []float64
}

// Collector adapts an executor's Listener events and Stats to Prometheus. It
// is safe for concurrent use. Create it with New.
type Collector struct {
	labelled  func(string) bool
	mu        sync.RWMutex
	ex        *executor.Executor
	groups    map[string]struct{} // groups with series of their own
	maxGroups int

	rejected  *prometheus.CounterVec
	completed *prometheus.CounterVec
	queued    *prometheus.HistogramVec
	run       *prometheus.HistogramVec

	queueDepth, running, groupsDesc, globalMax                        *prometheus.Desc
	groupRunning, groupWaiting, groupMaxIn, groupMaxCon, groupBreaker *prometheus.Desc
}

var _ executor.Listener = (*Collector)(nil)
var _ prometheus.Collector = (*Collector)(nil)

// New returns a Collector. Pass it to executor.WithListener, then call
// Observe with the executor, then register it. It panics, naming the
// option and its values, if Options.Buckets are not in strictly increasing
// order or hold a NaN, as prometheus.NewHistogram does: the histograms
// would otherwise fail at their first observation, in the listener; or if
// they are +Inf alone, which metrics/otel refuses too. It panics too if
// Options.MaxGroups is negative.
func New(o Options) *Collector {
	// A copy: prometheus keeps the slice it is given and reads it as each
	// group's histograms are made, in the listener, long after this check;
	// a caller reusing its slice would change, or break, the groups seen
	// from then on.
	buckets := slices.Clone(o.Buckets)
	if err := checkBuckets(buckets); err != nil {
		panic(err)
	}
	if o.MaxGroups < 0 {
		panic(fmt.Errorf("prom: New: Options.MaxGroups %d: must be >= 0", o.MaxGroups))
	}
	c := &Collector{labelled: o.Labelled, groups: make(map[string]struct{}), maxGroups: o.MaxGroups}
	if c.maxGroups == 0 {
		c.maxGroups = DefaultMaxGroups
	}
	if len(buckets) == 0 {
		buckets = prometheus.DefBuckets
	}
	ns := o.Namespace
	counter := func(m metricnames.Metric, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: m.Name, Help: m.Help}, labels)
	}
	histogram := func(m metricnames.Metric) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: m.Name, Help: m.Help, Buckets: buckets}, []string{"group"})
	}
	desc := func(m metricnames.Metric, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(ns, "", m.Name), m.Help, labels, nil)
	}
	c.rejected = counter(metricnames.Rejected, "group", "limit")
	c.completed = counter(metricnames.Completed, "group", "status")
	c.queued = histogram(metricnames.Queued)
	c.run = histogram(metricnames.Run)
	c.queueDepth = desc(metricnames.QueueDepth, "queue")
	c.running = desc(metricnames.Running)
	c.groupsDesc = desc(metricnames.Groups)
	c.globalMax = desc(metricnames.GlobalMaxInFlight)
	c.groupRunning = desc(metricnames.GroupRunning, "group")
	c.groupWaiting = desc(metricnames.GroupWaiting, "group")
	c.groupMaxIn = desc(metricnames.GroupMaxInFlight, "group")
	c.groupMaxCon = desc(metricnames.GroupMaxConcurrency, "group")
	c.groupBreaker = desc(metricnames.GroupBreakerState, "group")
	return c
}

// checkBuckets reports buckets that prometheus would refuse when the first
// series of a histogram is made, or that would misplace every observation.
// +Inf alone is refused too, as metrics/otel refuses it: prometheus drops
// that bound, every histogram having it, which leaves histograms of a
// single bucket that no quantile can be read from.
func checkBuckets(b []float64) error {
	if !metricnames.ValidBuckets(b) {
		return fmt.Errorf("prom: New: Options.Buckets %v: the bounds must be numbers in strictly increasing order", b)
	}
	if len(b) == 1 && math.IsInf(b[0], +1) {
		return fmt.Errorf("prom: New: Options.Buckets %v: a finite bound is needed", b)
	}
	return nil
}

// Observe sets the executor whose Stats are read at scrape time: the one
// whose listener c is. Until it is called, only the listener's counters and
// histograms are exported. A Collector is one executor's: Observe panics if
// ex is nil, or if c observes another executor already (see the package
// doc); observing the same one again does nothing.
func (c *Collector) Observe(ex *executor.Executor) {
	if ex == nil {
		panic("prom: Collector.Observe(nil): a Collector needs the executor whose listener it is")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ex != nil && c.ex != ex {
		// Its counters would sum both executors' events and its levels
		// show the last one's alone: series that agree with neither.
		panic("prom: Collector.Observe: the Collector observes another executor already; " +
			"a Collector is one executor's: make one per executor, under its own Namespace or label")
	}
	c.ex = ex
}

// label returns group's label value, admitting it to its own series if there
// is room.
func (c *Collector) label(group string) string {
	if group == OtherGroup {
		// Its series is the remainder's: one of its own would be
		// collected twice.
		return OtherGroup
	}
	if !utf8.ValidString(group) {
		// No label value may hold it: a series of its own would fail
		// every scrape, and the listener's counting for it.
		return OtherGroup
	}
	if group == "" {
		// Not a group: the executor refuses such a task as invalid. A
		// place of its own would take one of MaxGroups from a real group,
		// under a label that Prometheus reads as no label at all.
		return OtherGroup
	}
	if len(group) > MaxGroupLen {
		// A client-chosen key of any length would be repeated in every
		// series of the group on every scrape, for good.
		return OtherGroup
	}
	c.mu.RLock()
	_, ok := c.groups[group]
	full := len(c.groups) >= c.maxGroups
	c.mu.RUnlock()
	if ok {
		// Asked before Labelled, as metrics/otel does: a group accepted
		// once has its levels exported under its name for good (Collect),
		// so its counts stay there too, even if Labelled stops accepting
		// it (a tenant dropped from a reloaded configuration).
		return group
	}
	if c.labelled != nil {
		if c.labelled(group) {
			c.remember(group)
			return group
		}
		return OtherGroup
	}
	if full {
		return OtherGroup
	}
	if c.remember(group) {
		return group
	}
	return OtherGroup
}

// remember adds group to the groups with series of their own, if there is
// room, and reports whether it is one.
func (c *Collector) remember(group string) bool {
	// Every event of a group asks: the read lock answers the groups
	// already kept without taking the write lock, which every listener
	// call of every group would otherwise queue on.
	c.mu.RLock()
	_, ok := c.groups[group]
	c.mu.RUnlock()
	if ok {
		return true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.groups[group]; ok {
		return true
	}
	// With a Labelled func, the groups it accepts bound the set.
	if c.labelled == nil && len(c.groups) >= c.maxGroups {
		return false
	}
	c.groups[group] = struct{}{}
	return true
}

// OnSubmitted gives the task's group its place, if there is room: the level
// of submitted work is read from Stats, but a group whose tasks all wait
// (for global room, say) has had no other event, and its waiting tasks
// would be summed under OtherGroup until one of them started.
func (c *Collector) OnSubmitted(e executor.Event) { c.label(e.Group) }

// OnStarted records how long the task waited.
func (c *Collector) OnStarted(e executor.Event) {
	c.queued.WithLabelValues(c.label(e.Group)).Observe(metricnames.Seconds(e.Queued))
}

// OnCompleted counts the outcome and records how long the task ran. A
// completion of another Status than Success, Failed or Cancelled, which an
// executor never reports, is not counted, as metrics/otel counts none: its
// status label would be a value of the caller's ("rejected", "status(9)"),
// a series each.
func (c *Collector) OnCompleted(e executor.Event) {
	var status string
	switch e.Status {
	case executor.Success:
		status = "success"
	case executor.Failed:
		status = "failed"
	case executor.Cancelled:
		status = "cancelled"
	default:
		return
	}
	g := c.label(e.Group)
	c.completed.WithLabelValues(g, status).Inc()
	if e.Started { // a task cancelled while it waited never ran; one that ran may have for a measured 0
		c.run.WithLabelValues(g).Observe(metricnames.Seconds(e.Duration))
	}
}

// OnRejected counts the refusal under the limit that made it.
func (c *Collector) OnRejected(e executor.Event) {
	c.rejected.WithLabelValues(c.label(e.Group), LimitLabel(e.Err)).Inc()
}

// LimitLabel names, as a label value, the limit that refused a task with err:
// executor.Limit with spaces as underscores ("group_in-flight"), or "other"
// for an error that names none of the executor's limits.
func LimitLabel(err error) string { return metricnames.LimitLabel(err) }

// Describe sends the descriptions of every metric.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	c.rejected.Describe(ch)
	c.completed.Describe(ch)
	c.queued.Describe(ch)
	c.run.Describe(ch)
	for _, d := range []*prometheus.Desc{c.queueDepth, c.running, c.groupsDesc, c.globalMax,
		c.groupRunning, c.groupWaiting, c.groupMaxIn, c.groupMaxCon, c.groupBreaker} {
		ch <- d
	}
}

// Collect sends the current values. Levels and limits are read from the
// executor: each labelled group's GroupStats, and the remainder of Stats for
// OtherGroup, which has levels but no limits.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	c.rejected.Collect(ch)
	c.completed.Collect(ch)
	c.queued.Collect(ch)
	c.run.Collect(ch)

	c.mu.RLock()
	ex := c.ex
	groups := make([]string, 0, len(c.groups))
	for g := range c.groups {
		groups = append(groups, g)
	}
	c.mu.RUnlock()
	if ex == nil {
		return
	}
	s := ex.Stats()
	ch <- prometheus.MustNewConstMetric(c.queueDepth, prometheus.GaugeValue, float64(s.Waiting), "global")
	ch <- prometheus.MustNewConstMetric(c.running, prometheus.GaugeValue, float64(s.Running))
	ch <- prometheus.MustNewConstMetric(c.groupsDesc, prometheus.GaugeValue, float64(s.Groups))
	ch <- prometheus.MustNewConstMetric(c.globalMax, prometheus.GaugeValue, float64(s.GlobalMaxInFlight))
	running, waiting := s.RunningTasks, s.Waiting
	for _, g := range groups {
		gs, ok := ex.GroupStats(g) // zero when reclaimed: it has nothing running
		ch <- prometheus.MustNewConstMetric(c.groupRunning, prometheus.GaugeValue, float64(gs.RunningTasks), g)
		ch <- prometheus.MustNewConstMetric(c.groupWaiting, prometheus.GaugeValue, float64(gs.Waiting), g)
		if ok { // a reclaimed group has no limits of its own to show
			ch <- prometheus.MustNewConstMetric(c.groupMaxIn, prometheus.GaugeValue, float64(gs.MaxInFlight), g)
			ch <- prometheus.MustNewConstMetric(c.groupMaxCon, prometheus.GaugeValue, float64(gs.MaxConcurrency), g)
			ch <- prometheus.MustNewConstMetric(c.groupBreaker, prometheus.GaugeValue, float64(gs.Breaker), g)
		}
		running -= gs.RunningTasks
		waiting -= gs.Waiting
	}
	// The snapshots are taken one after another, so the remainder can be
	// off by what changed between them; never below zero.
	ch <- prometheus.MustNewConstMetric(c.groupRunning, prometheus.GaugeValue, float64(max(running, 0)), OtherGroup)
	ch <- prometheus.MustNewConstMetric(c.groupWaiting, prometheus.GaugeValue, float64(max(waiting, 0)), OtherGroup)
}
