// Package otel exports groupexec's numbers as OpenTelemetry instruments, from
// a metric.MeterProvider the program passes: the executor's (Collector), a
// bulkhead's (Bulkhead) and circuit breakers' (ObserveBreakers,
// BreakerTransitions). Package
// clusterotel does the same for a cluster limiter.
//
//	c, err := otel.New(provider, otel.Options{})
//	if err != nil { return err }
//	ex, err := executor.New(p, executor.WithListener(c))
//	if err != nil { return err }
//	c.Observe(ex)
//
// Names and meanings are those of metrics/prom where both exist, so that
// dashboards work with either exporter; attributes are prom's labels (group,
// limit, status, queue). Counters count events as the listener sees them;
// observable instruments read Stats, GroupStats or the bulkhead and breaker
// accessors when the reader collects: UpDownCounters for the levels (tasks
// running or waiting, permits out, a breaker's counts of its period), whose
// sum over an attribute is the whole's, so that a View or a backend that
// drops the group attribute still shows the executor's totals; gauges for
// the limits and states, which no sum makes sense of. Prometheus shows both
// as gauges. Units are UCUM: "s" for the histograms, an annotation of what
// is counted ({task}, {permit}, {request}, {group}, {transition}) for the
// rest, none for a state.
//
// The names keep Prometheus's spelling (a counter's _total, a unit's
// _seconds), where OpenTelemetry's conventions leave units and totals out
// of names, so that they are metrics/prom's, which dashboards and alerts
// are written against: changing them would break those. They survive
// translation to Prometheus (OpenTelemetry's compatibility rules, as in
// Prometheus's OTLP receiver and the Prometheus exporters) unchanged: a
// name that already ends in _total or in its unit's word gets neither
// again, and an annotation adds nothing. A state has no unit rather than
// "1", which translation would mark with _ratio.
//
// Executor instruments (Options.Namespace prefixes them):
//
//	queue_depth{queue="global"}              tasks waiting, all groups
//	executor_running_permits                 permits running, all groups
//	executor_groups                          groups whose state is kept
//	executor_global_max_in_flight            the global in-flight limit
//	group_running_tasks{group}               tasks running
//	group_waiting_tasks{group}               tasks waiting
//	group_max_in_flight{group}               the group's in-flight limit (bulkhead)
//	group_max_concurrency{group}             the group's concurrency limit
//	group_breaker_state{group}               0 closed, 1 open, 2 half-open
//	group_rejected_total{group,limit}        tasks refused, by the limit that refused them
//	group_completed_total{group,status}      tasks completed: success, failed, cancelled
//	group_queued_seconds{group}              time from submit to start (histogram)
//	group_run_seconds{group}                 time tasks ran (histogram)
//
// A limit that bounds nothing, policy.Unlimited (math.MaxInt: the default
// global in-flight limit, and any limit set to it), is observed as that
// number, as the instruments' descriptions say: the int64
// 9223372036854775807 on a 64-bit platform, which metrics/prom exports
// too, and which an exporter that sends float64 values (Prometheus's)
// shows as 9.223372036854776e+18. A level never reaches it and a level's
// ratio to it is 0, so saturation alerts need no case of their own; a
// dashboard that shows the limits filters it out or maps it to "none".
//
// The limit attribute takes metrics/prom's limit label values (LimitLabel):
// group_in-flight, group_queue_threshold, global_queue_threshold,
// queue_timeout, shutdown, circuit_breaker, limit_resolver, invalid_task,
// cluster_global_limiter, cluster_group_limiter, global_in-flight and
// group_concurrency (a task too heavy ever to run), or other (an error that
// names no limit, or a Limit that is none of the executor's).
//
// A task the rejection policy runs in its caller (CallerRuns, a rejection
// handler's RunInCaller) is counted in both group_rejected_total, since a
// limit refused it, and group_completed_total, since it ran; Stats counts
// it in CallerRuns and by its outcome, not in Rejected.
//
// A wait or run time is recorded as 0 s when an event gives a negative one
// (an executor's never do, but a Collector records what its caller tells
// it), as
// metrics/prom records it: a histogram takes non-negative values, its sum
// exported as monotonic.
//
// Group keys are often chosen by clients, and every distinct attribute value
// is a series kept by the SDK for the life of the process, so, as in prom,
// only the groups Options.Labelled accepts get series of their own (by
// default the first Options.MaxGroups seen); the others are summed under
// OtherGroup, as are the groups whose key is not valid UTF-8, which an
// exporter cannot send, those whose key is longer than MaxGroupLen bytes,
// which every export would repeat in each of their points, and the refusals
// of tasks with an empty group key (invalid), which take no place of their
// own. The levels and limits are
// exported for the labelled groups only.
//
// The SDK bounds each instrument's series too (its cardinality limit,
// 2000 by default), summing those past it under the attribute
// otel.metric.overflow=true, where no group can be told apart.
// group_rejected_total, the widest, has up to 13 series per group (one per
// limit value), so the default MaxGroups of 100 stays under it; a program
// that raises MaxGroups, or whose Labelled accepts more groups, past about
// 150 raises the provider's limit (sdkmetric.WithCardinalityLimit) with it.
//
// A namespace is refused, by every constructor and whatever the provider,
// with an error naming it, if it makes an instrument name that
// OpenTelemetry refuses: one starts with an ASCII letter, holds only ASCII
// letters, digits and _.-/, and is at most 255 characters long. That
// error, and every other one for an invalid argument or option (a nil
// provider or breaker, a name that is not valid UTF-8, an invalid Options
// field), matches ErrInvalidOption.
//
// Namespaces that differ only in case are one: the SDK takes instrument
// names case-insensitively (App_queue_depth and app_queue_depth are one
// instrument, exported as the casing seen first), so each refusal below
// holds for them as for one spelling, and what one spelling lets share
// (Bulkheads of other names, breakers of other names) shares the
// instruments of the casing seen first.
//
// A Collector is one executor's, as in metrics/prom: the listener of that
// executor alone, and observing it alone. Its counters count the events
// of every executor it listens to, but its levels and limits can be read
// from one only, and summing those of several makes no sense of the
// limits and breaker states. So Observe panics, saying why, when the
// Collector observes another executor already.
//
// Two Collectors on one MeterProvider with the same Namespace would report
// into the same instruments: their counters would sum and each gauge would
// show whichever callback observed last. So New refuses a second one
// (ErrNamespaceInUse, naming the namespace) until the first is
// unregistered. To export two executors, give each Collector its own
// Namespace, or its own MeterProvider (with a resource attribute that tells
// them apart). A provider that is not a pointer (such as a no-op one) is
// not checked, and one that is is not kept for the check: a provider the
// program drops is collected. A provider the program keeps holds each
// Collector registered on it, and the executor it observes, until
// Unregister: unregister a Collector when its executor is closed.
// Likewise NewBulkhead refuses a second live Bulkhead with the same name and
// namespace on one provider, and ObserveBreakers a breaker name that a live
// registration of the same namespace and provider observes, or that two of
// its breakers share (ErrNameInUse): give each bulkhead its own name, and
// observe each breaker once per namespace. NewBreakerTransitions refuses a
// second live BreakerTransitions with the same namespace on one provider
// (ErrNamespaceInUse), as New does: use one for every breaker of a
// namespace, and Unregister it to free the namespace.
//
// A namespace is a prefix, so exporters of different kinds could make
// instruments of one name: a Collector of Namespace "bulkhead" and a
// Bulkhead of namespace "" both make bulkhead_queue_depth, a Collector of
// Namespace "" and ObserveBreakers of namespace "group" both make
// group_breaker_state. The SDK would export two instruments of different
// descriptions and attributes under that name, which Prometheus refuses or
// mixes. So each exporter claims its instruments' names on a pointer
// provider, shared only with the exporters of its kind and namespace, and
// New, NewBulkhead, ObserveBreakers and NewBreakerTransitions refuse names
// another live exporter has (ErrNamespaceInUse, naming the instrument and
// the other exporter) until it is unregistered.
//
// Options.Buckets are advice to the SDK (WithExplicitBucketBoundaries),
// which keeps one histogram per name, description, unit and kind on a
// provider, for the provider's life: a Collector made after another's
// Unregister, on the same provider and Namespace, with other Buckets,
// records into the first one's bounds, without an error. A description of
// their own would not help: the SDK would export two histograms of one
// name. To change the bounds, make a new provider, or set them on the
// provider with a View (sdkmetric.WithView, AggregationExplicitBucketHistogram
// for group_*_seconds), which wins over Buckets.
//
// It lives in a package of its own so that the core packages never import
// OpenTelemetry: only programs that use it compile it. The package is named
// otel like its directory; import it under another name beside
// go.opentelemetry.io/otel.
//
// The examples, run by go test, read a Collector's instruments with the
// SDK's manual reader (Example), unregister a Collector with its executor
// (ExampleCollector_Unregister) and export a bulkhead (ExampleNewBulkhead,
// in example_bulkhead_test.go).
package otel
