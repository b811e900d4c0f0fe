// Package prom exports groupexec's numbers to Prometheus: a grouped
// executor's activity (Collector), a bulkhead's (Bulkhead) and circuit
// breakers' (Breakers, BreakerTransitions). Package clusterprom does the
// same for a cluster limiter. Each is a prometheus.Collector the program
// registers.
//
// A Collector is both an executor.Listener, which counts outcomes and times
// tasks as they happen, and a prometheus.Collector, which reads the
// executor's Stats and GroupStats at scrape time for what is a level rather
// than an event (running and waiting tasks, the limits, the group breakers'
// states):
//
//	c := prom.New(prom.Options{})
//	ex, err := executor.New(p, executor.WithListener(c))
//	if err != nil { return err }
//	c.Observe(ex)
//	prometheus.MustRegister(c)
//
// A Collector is one executor's: the listener of that executor alone, and
// observing it alone. Its counters count the events of every executor it
// listens to, but its levels and limits can be read from one only, and
// summing those of several makes no sense of the limits and breaker
// states; series mixing two executors would agree with neither. So
// Observe panics, saying why, when the Collector observes another
// executor already. To export several executors, make a Collector for
// each.
//
// A registry takes each metric name once per set of label values, so two
// executors' Collectors under the same names cannot both be registered: the
// second Register fails with a prometheus.AlreadyRegisteredError (and
// MustRegister panics). Give each a distinct Options.Namespace
// (one_group_completed_total, two_group_completed_total), or register each
// through prometheus.WrapRegistererWith with the same label name on both,
// which keeps the names and tells the series apart by the label:
//
//	prometheus.WrapRegistererWith(prometheus.Labels{"executor": "api"}, reg).MustRegister(apiCollector)
//	prometheus.WrapRegistererWith(prometheus.Labels{"executor": "jobs"}, reg).MustRegister(jobsCollector)
//
// The label must be on both: registered beside one without it, the names
// would have two sets of label names, which the registry refuses too.
//
// It lives in a package of its own so that the executor, policy and breaker
// packages never import Prometheus: only programs that want these metrics
// compile it.
//
// Group keys are often attacker-controlled (a tenant header), and every
// distinct label value is a time series kept for the life of the process. So
// only the groups Options.Labelled accepts get series of their own (by
// default the first Options.MaxGroups groups seen); all others are summed
// under the group label OtherGroup, as are the groups whose key is not valid
// UTF-8, which no label value may hold, those whose key is longer than
// MaxGroupLen bytes, which every scrape would repeat in each of their
// series, and the refusals of tasks with an empty group key (invalid), which
// take no place of their own. The levels and limits are exported for the
// labelled groups only (a reclaimed group has levels of 0 and no limits);
// OtherGroup has levels, the remainder of all groups', but no limits.
//
// The first MaxGroups groups seen keep their places for the life of the
// Collector, those of refused tasks too: where clients choose the keys,
// they may be one client's made-up keys, seen before the real tenants,
// which then all count under OtherGroup. There, pass a Labelled that
// accepts the groups the program knows (its configured tenants).
//
// Metrics (names as listed; Options.Namespace prefixes them):
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
// global in-flight limit, and any limit set to it), is exported as that
// number, as the gauges' help texts say: 9223372036854775807 on a 64-bit
// platform, which a float64 sample shows as 9.223372036854776e+18 and
// PromQL's literal 9223372036854775807 equals. A level never reaches it
// and a level's ratio to it is 0, so saturation alerts need no case of
// their own; a dashboard that shows the limits filters it out
// (executor_global_max_in_flight < 9223372036854775807) or maps it to
// "none".
//
// The limit label is LimitLabel's value, executor.Limit with spaces as
// underscores: group_in-flight, group_queue_threshold (a task displaced
// under DiscardOldest too), global_queue_threshold, queue_timeout,
// shutdown, circuit_breaker, limit_resolver, invalid_task,
// cluster_global_limiter, cluster_group_limiter, and, for a task too heavy
// ever to run, the limit it exceeds (global_in-flight, group_in-flight,
// group_concurrency); other for an error that names no limit, or a Limit
// that is none of the executor's (a caller's own, which, taken as it is,
// could be of any number and length, or not valid UTF-8).
//
// A task the rejection policy runs in its caller (CallerRuns, a rejection
// handler's RunInCaller) is counted in both group_rejected_total, since a
// limit refused it, and group_completed_total, since it ran; Stats counts
// it in CallerRuns and by its outcome, not in Rejected.
//
// A wait or run time is recorded as 0 s when an event gives a negative one
// (an executor's never do, but a Collector records what its caller tells
// it): a negative
// observation would lower a histogram's sum, which rate() reads as a
// counter's reset.
//
// A standalone bulkhead and circuit breakers are exported under the names,
// labels and meanings of metrics/otel's NewBulkhead, ObserveBreakers and
// BreakerTransitions, so that a dashboard works with either exporter:
//
//	m := prom.NewBulkhead("payments", "")
//	b, err := bulkhead.New(10, bulkhead.WithListener(m))
//	if err != nil { return err }
//	m.Observe(b)
//	tr := prom.NewBreakerTransitions("", nil)
//	cb, err := breaker.New(breaker.Settings{Name: "db", OnStateChange: tr.OnStateChange})
//	if err != nil { return err }
//	prometheus.MustRegister(m, prom.NewBreakers("", cb), tr)
//
//	bulkhead_in_flight_permits{bulkhead}        permits out
//	bulkhead_limit_permits{bulkhead}            the limit in force
//	bulkhead_queue_depth{bulkhead}              requests waiting
//	bulkhead_acquired_total{bulkhead}           acquires granted, whatever their weight
//	bulkhead_queued_total{bulkhead}             acquires that had to wait
//	bulkhead_rejected_total{bulkhead,code}      acquires refused, by code
//	breaker_state{breaker}                      0 closed, 1 open, 2 half-open
//	breaker_requests{breaker}                   requests let through in the current period
//	breaker_successes{breaker}                  successes recorded in the current period
//	breaker_failures{breaker}                   failures recorded in the current period
//	breaker_consecutive_failures{breaker}       failures since the last success
//	breaker_transitions_total{breaker,from,to}  changes of state
//
// Several bulkheads, each with its own name, register side by side; all the
// breakers of a namespace go in one Breakers.
//
// The examples, run by go test, gather a Collector's metrics from a
// registry (ExampleNew), register two executors' Collectors through
// WrapRegistererWith (ExampleNew_twoExecutors), and export a bulkhead and
// breakers (ExampleNewBulkhead, ExampleNewBreakers,
// ExampleNewBreakerTransitions, in example_policies_test.go).
package prom
