package otel

import (
	"context"
	"fmt"
	"math"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/groupexec/groupexec/executor"
	"github.com/groupexec/groupexec/metrics/internal/metricnames"
	"github.com/groupexec/groupexec/metrics/otel/internal/instname"
)

// ScopeName is the instrumentation scope of every meter this package makes.
const ScopeName = "github.com/groupexec/groupexec/metrics/otel"

// OtherGroup is the group attribute of every group without series of its
// own.
const OtherGroup = metricnames.OtherGroup

// DefaultMaxGroups is how many groups get series of their own when
// Options.Labelled is nil.
const DefaultMaxGroups = metricnames.DefaultMaxGroups

// MaxGroupLen is the longest group key, in bytes, that gets series of its
// own; longer ones are summed under OtherGroup.
const MaxGroupLen = metricnames.MaxGroupLen

// DefaultBuckets are the histograms' bucket bounds, in seconds: Prometheus's
// default buckets, so that both exporters give the same histograms.
var DefaultBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

// Options configure a Collector. The zero value is valid.
type Options struct {
	// Namespace, when set, prefixes every instrument name ("myapp" gives
	// myapp_queue_depth). New refuses one that makes a name OpenTelemetry
	// refuses (see the package doc).
	Namespace string
	// Labelled reports whether group gets series of its own; the others are
	// summed under OtherGroup. It must be safe for concurrent use, give the
	// same answer for a group every time, and accept a bounded set. nil
	// means: the first MaxGroups distinct groups seen.
	Labelled func(group string) bool
	// MaxGroups bounds the groups with series of their own when Labelled is
	// nil. 0 means DefaultMaxGroups; negative is invalid.
	MaxGroups int
	// Buckets are the histograms' bucket bounds, in seconds, in strictly
	// increasing order; nil or empty means DefaultBuckets. A last bound of
	// +Inf is dropped, as metrics/prom drops it: every histogram has that
	// bucket. They are advice to the SDK, which keeps the first bounds of
	// a name on a provider: see the package doc.
	Buckets []float64
}

// Collector is an executor.Listener that counts outcomes and times tasks as
// they happen, and reads the executor's Stats and GroupStats for the
// observable instruments when the reader collects. It is safe for
// concurrent use. Create it with New.
type Collector struct {
	groups *groups
	ex     atomic.Pointer[executor.Executor]
	reg    metric.Registration
	claim  *claimKey  // the pair c holds; nil for a provider that is not a pointer
	names  []claimKey // its instruments' names, which c shares with no other exporter
	// stopped is set by Unregister: the listener counts no more, since the
	// namespace is free for another Collector, whose instruments are these.
	stopped atomic.Bool

	rejected, completed metric.Int64Counter
	queued, run         metric.Float64Histogram

	// Levels, whose sums over an attribute are the whole's (the groups'
	// running tasks sum to the executor's), are UpDownCounters: a View
	// that drops the group attribute sums them. Limits and states, which
	// no sum makes sense of, are gauges.
	queueDepth, running, groupCount, groupRunning, groupWaiting metric.Int64ObservableUpDownCounter
	globalMax, groupMaxIn, groupMaxCon, groupBreaker            metric.Int64ObservableGauge
}

var _ executor.Listener = (*Collector)(nil)

// New returns a Collector whose instruments come from mp's meter ScopeName.
// Pass it to executor.WithListener, then call Observe with the executor. It
// fails if an option is invalid or the provider refuses an instrument, and,
// with an error matching ErrNamespaceInUse, if a Collector on mp with the
// same Namespace has not been unregistered: the two would report into the
// same instruments. A provider that is not a pointer is not checked; one
// that is is not kept for that check: a provider the program drops is
// collected with its Collectors.
//
// The provider holds the Collector's callback, and so the Collector and
// the executor it observes, until Unregister: a Collector made for an
// executor that is closed is unregistered with it, or the provider keeps
// both, and goes on exporting the closed executor's last levels, for as
// long as it lives (see the Collector.Unregister example).
func New(mp metric.MeterProvider, o Options) (*Collector, error) {
	if nilProvider(mp) {
		return nil, invalid("otel: New: nil MeterProvider")
	}
	if o.MaxGroups < 0 {
		return nil, invalid("otel: New: Options.MaxGroups %d: must be >= 0", o.MaxGroups)
	}
	maxGroups := o.MaxGroups
	if maxGroups == 0 {
		maxGroups = DefaultMaxGroups
	}
	if !metricnames.ValidBuckets(o.Buckets) {
		return nil, invalid("otel: New: Options.Buckets %v: the bounds must be numbers in strictly increasing order", o.Buckets)
	}
	buckets := o.Buckets
	if n := len(buckets); n > 0 && math.IsInf(buckets[n-1], +1) {
		// Every histogram has a bucket up to +Inf. Passed as a bound, it
		// adds an empty bucket above it, (+Inf, +Inf), which prom does not
		// export (prometheus.NewHistogram drops the bound) and which
		// Prometheus's OTLP translation writes as a second le="+Inf".
		if n == 1 {
			// Without a bound the SDK would use its own defaults, in
			// milliseconds.
			return nil, invalid("otel: New: Options.Buckets %v: a finite bound is needed", o.Buckets)
		}
		buckets = buckets[:n-1]
	}
	if len(buckets) == 0 {
		buckets = DefaultBuckets
	}
	c := &Collector{groups: newGroups(o.Labelled, maxGroups)}
	m := mp.Meter(ScopeName)
	in := instruments{m: m, ns: o.Namespace, opt: "New: Options.Namespace"}
	c.rejected = in.counter(metricnames.Rejected.Name, metricnames.Rejected.Help)
	c.completed = in.counter(metricnames.Completed.Name, metricnames.Completed.Help)
	c.queued = in.histogram(metricnames.Queued.Name, metricnames.Queued.Help, buckets)
	c.run = in.histogram(metricnames.Run.Name, metricnames.Run.Help, buckets)
	c.queueDepth = in.level(metricnames.QueueDepth.Name, metricnames.QueueDepth.Help, "{task}")
	c.running = in.level(metricnames.Running.Name, metricnames.Running.Help, "{permit}")
	c.groupCount = in.level(metricnames.Groups.Name, metricnames.Groups.Help, "{group}")
	c.globalMax = in.gauge(metricnames.GlobalMaxInFlight.Name, metricnames.GlobalMaxInFlight.Help, "{permit}")
	c.groupRunning = in.level(metricnames.GroupRunning.Name, metricnames.GroupRunning.Help, "{task}")
	c.groupWaiting = in.level(metricnames.GroupWaiting.Name, metricnames.GroupWaiting.Help, "{task}")
	c.groupMaxIn = in.gauge(metricnames.GroupMaxInFlight.Name, metricnames.GroupMaxInFlight.Help, "{permit}")
	c.groupMaxCon = in.gauge(metricnames.GroupMaxConcurrency.Name, metricnames.GroupMaxConcurrency.Help, "{permit}")
	c.groupBreaker = in.gauge(metricnames.GroupBreakerState.Name, metricnames.GroupBreakerState.Help, "")
	if in.err != nil {
		return nil, in.err
	}
	if err := claim(mp, o.Namespace, c); err != nil {
		return nil, err
	}
	names, err := shareNames(mp, c, fmt.Sprintf("New: Options.Namespace %q", o.Namespace), &in,
		fmt.Sprintf("a Collector of namespace %q", o.Namespace))
	if err != nil {
		unclaim(c)
		return nil, err
	}
	c.names = names
	reg, err := m.RegisterCallback(c.observe, c.queueDepth, c.running, c.groupCount, c.globalMax,
		c.groupRunning, c.groupWaiting, c.groupMaxIn, c.groupMaxCon, c.groupBreaker)
	if err != nil {
		unclaim(c)
		return nil, err
	}
	c.reg = reg
	return c, nil
}

// Observe sets the executor whose Stats the observable instruments read:
// the one whose listener c is. Until it is called, only the listener's
// counters and histograms have values. A Collector is one executor's, as
// in metrics/prom: Observe panics if ex is nil, or if c observes another
// executor already (see the package doc); observing the same one again
// does nothing.
func (c *Collector) Observe(ex *executor.Executor) {
	if ex == nil {
		panic("otel: Collector.Observe(nil): a Collector needs the executor whose listener it is")
	}
	if !c.ex.CompareAndSwap(nil, ex) && c.ex.Load() != ex {
		// Its counters would sum both executors' events and its levels
		// show the last one's alone: points that agree with neither.
		panic("otel: Collector.Observe: the Collector observes another executor already; " +
			"a Collector is one executor's: make one per executor, under its own Namespace or MeterProvider")
	}
}

// Unregister stops the observable instruments' callback, for a Collector
// no longer used, and frees its MeterProvider and Namespace for another
// Collector. Call it once the executor is closed: until then the provider
// keeps the Collector and the executor, and exports its levels. From then
// on the Collector counts and times nothing: a closed executor still
// refuses the tasks it is given (shutdown), and those would be counted
// into the instruments a later Collector in the namespace reports for its
// own executor. The counters and histograms are the provider's: a later
// Collector with the same names goes on from their totals.
func (c *Collector) Unregister() error {
	if err := c.reg.Unregister(); err != nil {
		return err // the callback may still run: the pair stays taken
	}
	c.stopped.Store(true) // before the namespace is free for another
	unclaim(c)
	return nil
}

// OnSubmitted gives the task's group its series, if there is room: the
// level of submitted work is read from Stats, but a group whose tasks all
// wait (for global room, say) has had no other event, and its waiting tasks
// would be summed under OtherGroup until one of them started.
func (c *Collector) OnSubmitted(e executor.Event) {
	if c.stopped.Load() {
		return
	}
	c.groups.of(e.Group)
}

// OnStarted records how long the task waited.
func (c *Collector) OnStarted(e executor.Event) {
	if c.stopped.Load() {
		return
	}
	c.queued.Record(context.Background(), metricnames.Seconds(e.Queued), c.groups.of(e.Group).group)
}

// OnCompleted counts the outcome and records how long the task ran. A
// completion of another Status than Success, Failed or Cancelled, which an
// executor never reports, is not counted, nor its group seen.
func (c *Collector) OnCompleted(e executor.Event) {
	if c.stopped.Load() {
		return
	}
	var i int
	switch e.Status {
	case executor.Success:
		i = 0
	case executor.Failed:
		i = 1
	case executor.Cancelled:
		i = 2
	default:
		// Not counted, as metrics/prom counts none; checked before the
		// group is looked up, as there, so that it takes no place of
		// MaxGroups, which would send a later group to OtherGroup here
		// alone.
		return
	}
	s := c.groups.of(e.Group)
	c.completed.Add(context.Background(), 1, s.completed[i])
	if e.Started { // a task cancelled while it waited never ran; one that ran may have for a measured 0
		c.run.Record(context.Background(), metricnames.Seconds(e.Duration), s.group)
	}
}

// OnRejected counts the refusal under the limit that made it.
func (c *Collector) OnRejected(e executor.Event) {
	if c.stopped.Load() {
		return
	}
	c.rejected.Add(context.Background(), 1, c.groups.of(e.Group).rejectedBy(LimitLabel(e.Err)))
}

// LimitLabel names, as an attribute value, the limit that refused a task
// with err: executor.Limit with spaces as underscores ("group_in-flight"), or
// "other" for an error that names none of the executor's limits; the same
// values as metrics/prom's LimitLabel.
func LimitLabel(err error) string { return metricnames.LimitLabel(err) }

var globalQueue = metric.WithAttributeSet(attribute.NewSet(attribute.String("queue", "global")))

// observe reports the levels and limits: each labelled group's GroupStats,
// and the remainder of Stats under OtherGroup.
func (c *Collector) observe(_ context.Context, o metric.Observer) error {
	ex := c.ex.Load()
	if ex == nil {
		return nil
	}
	s := ex.Stats()
	o.ObserveInt64(c.queueDepth, int64(s.Waiting), globalQueue)
	o.ObserveInt64(c.running, int64(s.Running))
	o.ObserveInt64(c.groupCount, int64(s.Groups))
	o.ObserveInt64(c.globalMax, int64(s.GlobalMaxInFlight))
	running, waiting := s.RunningTasks, s.Waiting
	for g, sr := range c.groups.labelledGroups() {
		gs, ok := ex.GroupStats(g)
		o.ObserveInt64(c.groupRunning, int64(gs.RunningTasks), sr.group)
		o.ObserveInt64(c.groupWaiting, int64(gs.Waiting), sr.group)
		if ok { // a reclaimed group has no limits of its own to show
			o.ObserveInt64(c.groupMaxIn, int64(gs.MaxInFlight), sr.group)
			o.ObserveInt64(c.groupMaxCon, int64(gs.MaxConcurrency), sr.group)
			o.ObserveInt64(c.groupBreaker, int64(gs.Breaker), sr.group)
		}
		running -= gs.RunningTasks
		waiting -= gs.Waiting
	}
	// The snapshots are taken one after another, so the remainder can be
	// off by what changed between them; never below zero.
	o.ObserveInt64(c.groupRunning, int64(max(running, 0)), c.groups.other.group)
	o.ObserveInt64(c.groupWaiting, int64(max(waiting, 0)), c.groups.other.group)
	return nil
}

// instruments makes instruments with a name prefix, keeping the first error.
type instruments struct {
	m     metric.Meter
	ns    string
	opt   string // the constructor and its namespace option, for errors: "New: Options.Namespace"
	err   error
	names []string // of the instruments made, for shareNames
}

// name returns the instrument name n in the namespace, which fails the
// constructor, naming its option, if it is not a valid one.
func (in *instruments) name(n string) string {
	if in.ns != "" {
		n = in.ns + "_" + n
	}
	if p := instname.Problem(n); p != "" {
		in.keep(invalid("otel: %s %q: makes the instrument name %q, which %s", in.opt, in.ns, n, p))
	}
	in.names = append(in.names, n)
	return n
}

func (in *instruments) keep(err error) {
	if in.err == nil && err != nil {
		in.err = err
	}
}

func (in *instruments) counter(name, desc string) metric.Int64Counter {
	return in.counterUnit(name, desc, "{task}")
}

func (in *instruments) counterUnit(name, desc, unit string) metric.Int64Counter {
	c, err := in.m.Int64Counter(in.name(name), metric.WithDescription(desc), metric.WithUnit(unit))
	in.keep(err)
	return c
}

func (in *instruments) histogram(name, desc string, buckets []float64) metric.Float64Histogram {
	h, err := in.m.Float64Histogram(in.name(name), metric.WithDescription(desc), metric.WithUnit("s"),
		metric.WithExplicitBucketBoundaries(buckets...))
	in.keep(err)
	return h
}

// level makes an instrument of a level that goes up and down and that sums
// over its attributes: a count of things in some state.
func (in *instruments) level(name, desc, unit string) metric.Int64ObservableUpDownCounter {
	u, err := in.m.Int64ObservableUpDownCounter(in.name(name), metric.WithDescription(desc), metric.WithUnit(unit))
	in.keep(err)
	return u
}

// gauge makes an instrument of a value that no sum makes sense of: a limit
// or a state.
func (in *instruments) gauge(name, desc, unit string) metric.Int64ObservableGauge {
	g, err := in.m.Int64ObservableGauge(in.name(name), metric.WithDescription(desc), metric.WithUnit(unit))
	in.keep(err)
	return g
}
